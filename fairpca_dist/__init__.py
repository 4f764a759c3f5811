"""fairpca_dist: fair principal component analysis on large tables.

One dask pass computes per-group sufficient statistics (:func:`compute_moments`); solvers
run on those p×p statistics (:func:`fit_projection`); :class:`FairPCA` wraps both as a
scikit-learn transformer.
"""

from fairpca_dist.engine.cells import CellMoments, HashCells
from fairpca_dist.engine.moments import GroupMoments
from fairpca_dist.engine.passes import compute_moments
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
from fairpca_dist.io.model_io import load_model, save_model
from fairpca_dist.solvers import SOLVERS, FairProjection, fit_projection

__version__ = "0.1.0"


def __getattr__(name: str):  # noqa: ANN202 - module attribute hook (PEP 562)
    # The estimator pulls in scikit-learn (~3 s to import); flows and Dask workers never need it.
    if name == "FairPCA":
        from fairpca_dist.estimator import FairPCA

        return FairPCA
    if name in ("compare", "write_comparison"):  # the report's plotting and classifier libraries
        from fairpca_dist.assessment import comparison_report, table_comparison

        return table_comparison.compare if name == "compare" else comparison_report.write_comparison
    raise AttributeError(f"module 'fairpca_dist' has no attribute {name!r}")


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
