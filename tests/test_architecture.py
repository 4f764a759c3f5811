"""The import rules of docs/pages/architecture.md ("Which wing may import which"), checked on the
code: every ``fairpca_dist`` import of every module, at any depth but outside
``if TYPE_CHECKING:`` blocks (annotations only), must avoid what the page says it never imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
STEPS = ("fairpca_dist.fitting", "fairpca_dist.projection", "fairpca_dist.params")
SURFACES = ("fairpca_dist.estimator", "fairpca_dist.cli", "fairpca_dist.flows")
IO_BASE = ("storage", "atomic", "versions", "markers", "jsonable", "datasets")

# module name prefix -> the prefixes it must never import (the table's last column)
NEVER: dict[str, tuple[str, ...]] = {
    "fairpca_dist.exceptions": ("fairpca_dist.",),
    "fairpca_dist.wording": (
        "fairpca_dist.engine",
        "fairpca_dist.io",
        "fairpca_dist.solvers",
        "fairpca_dist.assessment",
        *STEPS,
        *SURFACES,
    ),
    "fairpca_dist.extras": (
        "fairpca_dist.engine",
        "fairpca_dist.io",
        "fairpca_dist.solvers",
        "fairpca_dist.assessment",
        *STEPS,
        *SURFACES,
    ),
    **{
        f"fairpca_dist.io.{name}": (
            "fairpca_dist.engine",
            "fairpca_dist.solvers",
            "fairpca_dist.assessment",
            *STEPS,
            *SURFACES,
        )
        for name in IO_BASE
    },
    "fairpca_dist.engine": (
        "fairpca_dist.solvers",
        "fairpca_dist.assessment",
        "fairpca_dist.io.ingest",
        "fairpca_dist.io.model_io",
        "fairpca_dist.io.runs",
        *STEPS,
        *SURFACES,
    ),
    "fairpca_dist.solvers": (
        "fairpca_dist.io",
        "fairpca_dist.assessment.scoring",
        "fairpca_dist.assessment.evaluation",
        "fairpca_dist.assessment.comparison",
        "fairpca_dist.assessment.report",
        "fairpca_dist.assessment.downstream",
        "fairpca_dist.assessment.charts",
        *STEPS,
        *SURFACES,
    ),
    "fairpca_dist.io.ingest": ("fairpca_dist.assessment", *SURFACES),
    "fairpca_dist.io.moments_cache": ("fairpca_dist.assessment", *SURFACES),
    "fairpca_dist.io.model_io": ("fairpca_dist.assessment", *SURFACES),
    "fairpca_dist.assessment": SURFACES,
    "fairpca_dist.estimator": ("fairpca_dist.cli", "fairpca_dist.flows", *STEPS),
    **{step: SURFACES for step in STEPS},
    "fairpca_dist.io.runs": ("fairpca_dist.cli", "fairpca_dist.flows"),
    "fairpca_dist.flows": ("fairpca_dist.cli", "fairpca_dist.estimator"),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "fairpca_dist").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for path in sorted((ROOT / "flows").glob("*.py")):
        found["fairpca_dist.flows" + ("" if path.stem == "__init__" else f".{path.stem}")] = path
    return found


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every fairpca_dist import, TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "fairpca_dist":  # from fairpca_dist import name: a module or a public name
                found += [(node.lineno, f"fairpca_dist.{alias.name}") for alias in node.names]
            elif node.module.startswith("fairpca_dist."):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("fairpca_dist.")]
    return found


def _rule(module: str) -> tuple[str, ...]:
    matches = [prefix for prefix in NEVER if module == prefix or module.startswith(prefix + ".")]
    return NEVER[max(matches, key=len)] if matches else ()


def _breaks(imported: str, forbidden: tuple[str, ...]) -> bool:
    return any(
        imported == prefix or imported.startswith(prefix if prefix.endswith(".") else prefix + ".")
        for prefix in forbidden
    )


@pytest.mark.parametrize("module", sorted(_modules()))
def test_module_imports_follow_the_architecture_page(module):
    path = _modules()[module]
    forbidden = _rule(module)
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {imported}"
        for line, imported in _imports(path)
        if _breaks(imported, forbidden)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_rules_catch_an_upward_import(tmp_path):
    """The checker is not vacuous: an engine module importing the estimator breaks its rule."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from fairpca_dist.estimator import FairPCA\n")
    assert any(_breaks(imported, _rule("fairpca_dist.engine.passes")) for _, imported in _imports(probe))
    assert not any(_breaks(imported, _rule("fairpca_dist.cli")) for _, imported in _imports(probe))
