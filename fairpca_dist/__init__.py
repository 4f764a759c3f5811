"""fairpca_dist: fair principal component analysis on large tables.

One dask pass computes per-group sufficient statistics (:func:`compute_moments`); solvers
run on those p×p statistics (:func:`fit_projection`); :class:`FairPCA` wraps both as a
scikit-learn transformer.

The public names are imported when first used (PEP 562 module ``__getattr__``): ``import
fairpca_dist`` alone imports only the exceptions, so a command or a submodule import (``import
fairpca_dist.solvers``) does not pay for dask, pandas and scikit-learn before it needs them
(``fairpca demo`` starts its Prefect server 1-3 s earlier). ``from fairpca_dist import X`` and
``fairpca_dist.X`` work as before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fairpca_dist.exceptions import (
    AccessError,
    ConvergenceWarning,
    FairPCAError,
    GroupError,
    InputError,
    ModelWarning,
    OutputBusyError,
    OutputPathError,
    ReadError,
    ResourceError,
    SchemaError,
    ServiceError,
    SolverError,
    WriteError,
)

if TYPE_CHECKING:  # the [report] extra's two, outside __all__ (below), re-exported by their alias
    from fairpca_dist.assessment.comparison_report import write_comparison as write_comparison
    from fairpca_dist.assessment.table_comparison import compare as compare
    from fairpca_dist.engine.cells import CellMoments, HashCells
    from fairpca_dist.engine.moments import GroupMoments
    from fairpca_dist.engine.passes import compute_moments
    from fairpca_dist.estimator import FairPCA
    from fairpca_dist.io.model_io import load_model, save_model
    from fairpca_dist.solvers import SOLVERS, FairProjection, fit_projection

__version__ = "0.1.0"

# public name -> the module that defines it, imported on first access. The estimator pulls in
# scikit-learn (~3 s to import), flows and Dask workers never need it; compare and
# write_comparison need the report's plotting and classifier libraries (the [report] extra).
_LAZY: dict[str, str] = {
    "GroupMoments": "fairpca_dist.engine.moments",
    "CellMoments": "fairpca_dist.engine.cells",
    "HashCells": "fairpca_dist.engine.cells",
    "compute_moments": "fairpca_dist.engine.passes",
    "load_model": "fairpca_dist.io.model_io",
    "save_model": "fairpca_dist.io.model_io",
    "SOLVERS": "fairpca_dist.solvers",
    "FairProjection": "fairpca_dist.solvers",
    "fit_projection": "fairpca_dist.solvers",
    "FairPCA": "fairpca_dist.estimator",
    "compare": "fairpca_dist.assessment.table_comparison",
    "write_comparison": "fairpca_dist.assessment.comparison_report",
}


def __getattr__(name: str) -> Any:
    """Import the module defining the public ``name`` and return it (kept as a module attribute,
    so this runs once per name)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fairpca_dist' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


# compare and write_comparison (loaded on first access, above) need the [report] extra, so they
# stay out of __all__: ``from fairpca_dist import *`` works on a core install.
__all__ = [
    "FairPCA",
    "GroupMoments",
    "CellMoments",
    "HashCells",
    "FairProjection",
    "compute_moments",
    "fit_projection",
    "load_model",
    "save_model",
    "SOLVERS",
    "FairPCAError",
    "InputError",
    "SchemaError",
    "GroupError",
    "ReadError",
    "OutputPathError",
    "AccessError",
    "ServiceError",
    "ResourceError",
    "SolverError",
    "WriteError",
    "OutputBusyError",
    "ConvergenceWarning",
    "ModelWarning",
    "__version__",
]
