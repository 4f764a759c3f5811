"""The examples of the documentation run: the doctests of every module of the package (flows
included) and the Python code blocks of the site's pages (docs/pages).

A code block of a page is skipped when the line before it is an HTML comment starting with
``<!-- not run`` (and saying why: it needs an object store, a cluster, a Prefect server, minutes).
The blocks of one page run in order in one namespace, in a temporary folder, so a page may build
on its earlier blocks. A line ``print(...)  # → OUTPUT`` must print OUTPUT (the comment after
``→ `` up to two spaces, which start an explanation; ``...`` matches anything, as in doctests)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import pytest

import fairpca_dist

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "pages"
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)```", re.S)
SHOWN = re.compile(r"^(?P<indent>\s*)print\((?P<args>.*)\)\s+# → (?P<output>.+?)(?:  .*)?$", re.M)
_CHECKER = doctest.OutputChecker()


def _expect_printed(output: str, *values: object) -> None:
    """``print(*values)``, checked against ``output`` as a doctest checks its output."""
    printed = " ".join(str(value) for value in values)
    print(printed)
    assert _CHECKER.check_output(output + "\n", printed + "\n", doctest.ELLIPSIS), (
        f"the page says {output!r}, the code printed {printed!r}"
    )


def checked_code(code: str) -> str:
    """``code`` with each ``print(...)  # → OUTPUT`` line made a check that it prints OUTPUT."""
    return SHOWN.sub(lambda m: f"{m['indent']}_expect_printed({m['output']!r}, {m['args']})", code)


def package_modules() -> list[str]:
    """Every module of fairpca_dist, fairpca_dist.flows included."""
    names = {"fairpca_dist"}
    for info in pkgutil.walk_packages(fairpca_dist.__path__, "fairpca_dist."):
        names.add(info.name)
    # an editable install maps fairpca_dist.flows to the repository's flows/ folder, which
    # fairpca_dist.__path__ does not hold: walk it by its own spec
    spec = importlib.util.find_spec("fairpca_dist.flows")
    assert spec is not None and spec.submodule_search_locations, "fairpca_dist.flows is not installed"
    names.add("fairpca_dist.flows")
    for info in pkgutil.iter_modules(spec.submodule_search_locations, "fairpca_dist.flows."):
        names.add(info.name)
    return sorted(names)


def page_blocks(page: Path) -> list[str]:
    """The Python code blocks of ``page`` that are meant to run."""
    text = "\n" + page.read_text(encoding="utf-8")
    return [m.group("code") for m in BLOCK.finditer(text) if not m.group("before").startswith("<!-- not run")]


def test_the_package_and_its_flows_are_found():
    modules = package_modules()
    assert "fairpca_dist.flows.pipeline" in modules
    assert "fairpca_dist.engine.cells" in modules


@pytest.mark.parametrize("name", package_modules())
def test_doctests(name, tmp_path, monkeypatch):
    try:
        module = importlib.import_module(name)
    except ImportError as error:  # a module of an extra that is not installed
        pytest.skip(f"{name} needs {error.name}")
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [test for test in finder.find(module, name) if test.examples]
    for test in tests:
        runner.run(test, out=lambda text: None)
    failures = runner.failures
    if failures:  # run again to show what failed
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        for test in tests:
            runner.run(test, out=report.append)
        pytest.fail(f"{failures} doctest example(s) of {name} failed:\n" + "".join(report))


def test_every_page_is_found_and_some_have_examples():
    pages = sorted(PAGES.rglob("*.md"))
    assert len(pages) > 10
    assert sum(bool(page_blocks(p)) for p in pages) >= 3


@pytest.mark.parametrize("page", sorted(str(p.relative_to(PAGES)) for p in PAGES.rglob("*.md") if page_blocks(p)))
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__", "_expect_printed": _expect_printed}
    for i, code in enumerate(page_blocks(PAGES / page)):
        exec(compile(checked_code(code), f"{page} (block {i + 1})", "exec"), namespace)


def test_a_page_output_that_is_not_printed_fails():
    namespace: dict[str, object] = {"_expect_printed": _expect_printed}
    exec(
        checked_code("print(1 + 1, [2])  # → 2 [2]  an explanation\nprint({'a': 1, 'b': 2})  # → {'a': 1, ...}"),
        namespace,
    )
    with pytest.raises(AssertionError, match="the page says '7', the code printed '2'"):
        exec(checked_code("print(1 + 1)  # → 7"), namespace)
    assert sum(bool(SHOWN.search(block)) for p in PAGES.rglob("*.md") for block in page_blocks(p)) >= 8


def test_the_site_shows_sphinx_roles_as_code():
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location("sphinx_roles", ROOT / "docs" / "hooks" / "sphinx_roles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "see :func:`~fairpca_dist.compute_moments`, :class:`GroupMoments` and :meth:`fit <FairPCA.fit>`"
    assert module.plain_roles(text) == "see `compute_moments`, `GroupMoments` and `fit`"
