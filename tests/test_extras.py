"""The core install and its extras.

Importing the core imports no optional package; a feature whose extra is missing raises one
line naming the extra (checked by hiding the package: ``sys.modules[name] = None`` in a new
interpreter, which makes ``import name`` fail as if it were not installed); the lower bounds in
pyproject are the versions ``.ci/compat`` installs first; the wheel holds ``fairpca_dist`` only.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

from fairpca_dist.exceptions import FairPCAError, MissingDependencyError
from fairpca_dist.extras import EXTRAS, check_installed, missing_dependency, require

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = sorted({module for modules in EXTRAS.values() for module in modules} | {"fastapi"})


def _run(code: str, *, hide: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter in which the modules ``hide`` cannot be imported."""
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in hide)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tempfile.gettempdir(),  # not the checkout: fairpca_dist is the installed one
    )


def module_installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_the_core_imports_no_optional_package() -> None:
    result = _run(
        """
        import fairpca_dist
        from fairpca_dist import FairPCA, compute_moments, fit_projection
        import fairpca_dist.cli, fairpca_dist.estimator, fairpca_dist.fitting, fairpca_dist.solvers
        print(sorted({name.split(".")[0] for name in sys.modules}))
        """
    )
    assert result.returncode == 0, result.stderr
    loaded = set(eval(result.stdout))  # noqa: S307 - our own subprocess's list of names
    assert "fairpca_dist" in loaded and "dask" in loaded
    assert loaded.isdisjoint(OPTIONAL), sorted(loaded & set(OPTIONAL))


def test_the_estimator_and_compute_moments_work_without_the_extras() -> None:
    """fair-eig and samadi-mw fit, and compute_moments on a dask DataFrame runs on threads, with
    every optional package hidden (distributed too)."""
    result = _run(
        """
        import dask.dataframe as dd
        import numpy as np
        import pandas as pd
        from fairpca_dist import FairPCA, compute_moments

        rng = np.random.default_rng(0)
        x, groups = rng.normal(size=(300, 5)), rng.integers(0, 2, 300)
        for method in ("fair-eig", "samadi-mw"):
            fitted = FairPCA(method=method, n_components=2).fit(x, sensitive_features=groups)
            assert fitted.transform(x).shape == (300, 2)
        frame = pd.DataFrame(x, columns=list("abcde")).assign(g=groups)
        moments = compute_moments(dd.from_pandas(frame, npartitions=3), sensitive_feature="g")
        assert int(np.sum(moments.n_samples)) == 300 and moments.n_groups == 2, moments
        print("ok")
        """,
        hide=tuple(OPTIONAL),
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


@pytest.mark.parametrize("method", ["samadi-sdp", "olfat-sdp"])
def test_a_conic_method_without_cvxpy_names_the_conic_extra(method: str) -> None:
    result = _run(
        f"""
        import numpy as np
        from fairpca_dist import FairPCA

        rng = np.random.default_rng(0)
        x, groups = rng.normal(size=(200, 4)), rng.integers(0, 2, 200)
        FairPCA(method={method!r}, n_components=2).fit(x, sensitive_features=groups)
        """,
        hide=("cvxpy",),
    )
    assert result.returncode != 0
    assert _last_line(result) == (
        "fairpca_dist.exceptions.MissingDependencyError: the package cvxpy is not installed "
        f'(needed for method {method!r}): pip install "fairpca_dist[conic]"'
    )


@pytest.mark.parametrize(
    ("module", "hidden", "extra"),
    [
        ("fairpca_dist.assessment.charts", "matplotlib", "report"),
        ("fairpca_dist.assessment.report", "matplotlib", "report"),
        ("fairpca_dist.assessment.table_evaluation", "matplotlib", "report"),
        ("fairpca_dist.assessment.downstream", "fairlearn", "report"),
        ("fairpca_dist.flows", "prefect", "flows"),
        ("fairpca_dist.flows.pipeline", "prefect_dask", "flows"),
    ],
)
def test_a_module_of_an_extra_names_the_extra(module: str, hidden: str, extra: str) -> None:
    result = _run(f"import {module}", hide=(hidden,))
    line = _last_line(result)
    # the hidden package, or another of the same extra that this environment lacks too
    named = re.fullmatch(
        r"fairpca_dist\.exceptions\.MissingDependencyError: the package (\S+) is not installed "
        r'\(needed for .+\): pip install "fairpca_dist\[(\w+)\]"',
        line,
    )
    assert named, line
    assert named.group(2) == extra and named.group(1).replace("-", "_") in EXTRAS[extra], line
    if all(module_installed(name) for name in EXTRAS[extra] if name != hidden):
        assert named.group(1).replace("-", "_") == hidden, line


def test_the_cli_pipeline_without_prefect_is_one_line_naming_flows(tmp_path: Path) -> None:
    """``fairpca pipeline`` checks its input, then fails before any work with the extra to install."""
    table = tmp_path / "people.csv"
    table.write_text("a,b,c,sex\n" + "".join(f"{i % 7},{i % 5},{i % 3},{i % 2}\n" for i in range(60)))
    result = _run(
        f"""
        from fairpca_dist.cli import main
        sys.exit(main(["pipeline", {str(table)!r}, "--sensitive-feature", "sex", "--n-components", "1",
                       "--runs-dir", {str(tmp_path / "runs")!r}]))
        """,
        hide=("prefect",),
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == (
        "fairpca: error: the package prefect is not installed (needed for the Prefect flows (fairpca pipeline)): "
        'pip install "fairpca_dist[flows]"'
    )
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_star_import_works_without_the_report_extra() -> None:
    """``from fairpca_dist import *`` on a core install: nothing in ``__all__`` needs an extra
    (compare and write_comparison, which need [report], are reached by name only)."""
    result = _run(
        "from fairpca_dist import *\nprint(sorted(dir())[:1])", hide=("matplotlib", "fairlearn", "cvxpy", "prefect")
    )
    assert result.returncode == 0, result.stderr


def test_connecting_to_a_scheduler_without_distributed_names_the_cluster_extra() -> None:
    result = _run(
        """
        import numpy as np
        from fairpca_dist import compute_moments
        compute_moments(np.ones((4, 2)), sensitive_feature=[0, 0, 1, 1], client="tcp://127.0.0.1:8786")
        """,
        hide=("distributed",),
    )
    assert _last_line(result).endswith(
        "the package distributed is not installed (needed for connecting to the Dask scheduler "
        "'tcp://127.0.0.1:8786'): pip install \"fairpca_dist[cluster]\""
    )


def test_require_and_check_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert require("json", extra="core", feature="x").dumps([1]) == "[1]"
    check_installed("json", "numpy", extra="core", feature="x")
    monkeypatch.setitem(sys.modules, "cvxpy", None)
    with pytest.raises(MissingDependencyError) as raised:
        require("cvxpy", extra="conic", feature="method 'samadi-sdp'")
    assert isinstance(raised.value, FairPCAError) and isinstance(raised.value, ImportError)
    assert str(raised.value) == (
        "the package cvxpy is not installed (needed for method 'samadi-sdp'): pip install \"fairpca_dist[conic]\""
    )
    with pytest.raises(MissingDependencyError, match=r"package no_such_module_xyz is not installed .*\[flows\]"):
        check_installed("json", "no_such_module_xyz", extra="flows", feature="f")
    monkeypatch.setitem(sys.modules, "prefect_dask", None)
    with pytest.raises(MissingDependencyError, match=r"package prefect-dask is not installed"):
        check_installed("json", "prefect_dask", extra="flows", feature="f")
    error = missing_dependency(
        ModuleNotFoundError("No module named 'kiwisolver'", name="kiwisolver"), extra="report", feature="f"
    )
    assert "package kiwisolver is not installed" in str(error)


def _requirement(text: str) -> tuple[str, str]:
    """``"dask[array]>=2026.7.0"`` -> ``("dask", "2026.7.0")``."""
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?>=([0-9][^,; ]*)", text.split(";")[0].strip())
    assert match, f"a core dependency needs a plain lower bound (>=): {text!r}"
    return match.group(1).lower(), match.group(2)


def test_the_lower_bounds_are_the_versions_ci_installs_first() -> None:
    """Every core dependency's lower bound is a version .ci/compat's oldest leg installs
    (.ci/oldest.txt), so no bound is a version nobody tested."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    bounds = dict(_requirement(text) for text in project["dependencies"])
    oldest = {}
    for line in (ROOT / ".ci" / "oldest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)", line.strip()).groups()  # type: ignore[union-attr]
            oldest[name.lower()] = version
    assert bounds == oldest


def test_the_extras_are_the_documented_ones() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(extras)
    for extra, modules in EXTRAS.items():
        listed = " ".join(extras[extra]).lower().replace("-", "_")
        for module in modules:
            assert module in listed or extra in ("cloud",), (extra, module)


def test_the_wheel_holds_fairpca_dist_only(tmp_path: Path) -> None:
    """Built offline from this checkout: only fairpca_dist/ (with flows/ and py.typed) and the
    dist-info with the licence; no top-level flows."""
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(
            f"setuptools {setuptools.__version__} cannot build this project (77 or later: make env installs it)"
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            str(ROOT),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("fairpca_dist-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"fairpca_dist", next(top for top in tops if top.endswith(".dist-info"))}
    assert "fairpca_dist/py.typed" in names and "fairpca_dist/flows/pipeline.py" in names
    assert any(name.endswith(".dist-info/licenses/docs/LICENSE") for name in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: BSD-3-Clause" in metadata
    assert "Provides-Extra: conic" in metadata
