"""``fairpca_dist``'s public names are imported on first use (PEP 562): ``import fairpca_dist``
alone loads none of the heavy libraries, and every public name is the object its module defines."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import fairpca_dist

HEAVY = ("numpy", "pandas", "scipy", "dask", "distributed", "sklearn", "prefect", "matplotlib")

# the modules that define the public names, and those names: written out here, not read from the package
DEFINING_MODULES = {
    "fairpca_dist.engine.moments": ("GroupMoments",),
    "fairpca_dist.engine.cells": ("CellMoments", "HashCells"),
    "fairpca_dist.engine.passes": ("compute_moments",),
    "fairpca_dist.io.model_io": ("load_model", "save_model"),
    "fairpca_dist.solvers": ("SOLVERS", "fit_projection"),
    "fairpca_dist.solvers.result": ("FairProjection",),
    "fairpca_dist.estimator": ("FairPCA",),
    "fairpca_dist.assessment.table_comparison": ("compare",),
    "fairpca_dist.assessment.comparison_report": ("write_comparison",),
    "fairpca_dist.exceptions": ("FairPCAError", "ServiceError"),
}
DEFINED_IN = {name: module for module, names in DEFINING_MODULES.items() for name in names}


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_importing_the_package_loads_no_heavy_library() -> None:
    done = _fresh(f"import sys, fairpca_dist\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_name_imports_only_what_it_needs() -> None:
    """The exceptions need nothing; the solvers need no dask, scikit-learn or Prefect."""
    done = _fresh(
        "import sys\nfrom fairpca_dist import InputError, SOLVERS, fit_projection\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed', 'sklearn', 'prefect'}))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(DEFINED_IN))
def test_each_public_name_is_its_modules_object(name: str) -> None:
    value = getattr(fairpca_dist, name)
    assert value is getattr(importlib.import_module(DEFINED_IN[name]), name)
    assert name in dir(fairpca_dist)


def test_every_name_of_all_resolves_and_unknown_names_raise() -> None:
    assert all(getattr(fairpca_dist, name) is not None for name in fairpca_dist.__all__)
    with pytest.raises(AttributeError, match="module 'fairpca_dist' has no attribute 'no_such_name'"):
        fairpca_dist.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from fairpca_dist import no_such_name", {})


def test_checking_a_target_column_imports_no_classifier() -> None:
    """The pipeline's checks (fairpca_dist.params) ask the downstream module whether a target is
    binary before any run: that loads neither scikit-learn nor fairlearn (0.8-1.3 s), which the
    report's classifier imports when it runs."""
    done = _fresh(
        "import sys\nimport pandas as pd\nfrom fairpca_dist.assessment.downstream import check_binary_target\n"
        "check_binary_target(pd.Series([3, 2], index=['a', 'b']), 'y')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sklearn', 'fairlearn'}))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
