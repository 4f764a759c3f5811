"""Optional packages and the extras that install them.

The core install (``pip install fairpca_dist``) holds the estimator, :func:`~fairpca_dist.compute_moments`
on dask and the solvers that need only numpy and scipy. Everything else comes with an extra:

========  ==================================================  =========================================
extra     packages                                            needed by
========  ==================================================  =========================================
conic     cvxpy                                               methods ``samadi-sdp``, ``olfat-sdp``,
                                                              ``mm-sparse``, ``mm`` with
                                                              ``inner="sdp"``
cluster   distributed                                         a Dask cluster (``client=`` an address)
flows     prefect, prefect-dask, distributed                  ``fairpca pipeline``, ``fairpca demo``,
                                                              :mod:`fairpca_dist.flows`
report    matplotlib, fairlearn                               reports, evaluation figures, comparisons
s3        s3fs                                                ``s3://`` URLs
gcs       gcsfs                                               ``gs://`` URLs
azure     adlfs                                               ``abfs://`` and ``az://`` URLs
cloud     s3fs, gcsfs, adlfs                                  all three object stores
all       the conic, cluster, flows and report packages       ``make demo``; add cloud for object stores
========  ==================================================  =========================================

Importing :mod:`fairpca_dist` imports none of them; a feature imports its packages when it runs,
through :func:`require` (or checks them with :func:`check_installed`), so a missing one raises
:class:`~fairpca_dist.exceptions.MissingDependencyError` naming the extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from fairpca_dist.exceptions import MissingDependencyError

__all__ = ["EXTRAS", "check_installed", "missing_dependency", "require"]

#: The optional packages (import names) each extra installs.
EXTRAS: dict[str, tuple[str, ...]] = {
    "conic": ("cvxpy",),
    "cluster": ("distributed",),
    "flows": ("prefect", "prefect_dask", "distributed"),
    "report": ("matplotlib", "fairlearn"),
    "s3": ("s3fs",),
    "gcs": ("gcsfs",),
    "azure": ("adlfs",),
    "cloud": ("s3fs", "gcsfs", "adlfs"),
}

# import name -> the name pip installs it by, where they differ
_DISTRIBUTIONS = {"prefect_dask": "prefect-dask", "sklearn": "scikit-learn"}


def _message(module: str, extra: str, feature: str) -> str:
    package = _DISTRIBUTIONS.get(module, module)
    return f'the package {package} is not installed (needed for {feature}): pip install "fairpca_dist[{extra}]"'


def missing_dependency(error: ImportError, *, extra: str, feature: str) -> MissingDependencyError:
    """The error to raise when importing a package of ``extra`` failed with ``error``.

    Parameters
    ----------
    error : ImportError
        The failed import; its ``name`` (the module not found) goes into the message.
    extra : str
        The extra that installs the package, e.g. ``"report"``.
    feature : str
        What needs it, e.g. ``"the charts of reports"``.

    Returns
    -------
    MissingDependencyError
        To be raised ``from error``: ``the package <name> is not installed (needed for <feature>):
        pip install "fairpca_dist[<extra>]"``.

    Examples
    --------
    >>> try:
    ...     import not_a_package  # doctest: +SKIP
    ... except ImportError as error:
    ...     raise missing_dependency(error, extra="report", feature="a chart") from error
    """
    name = (error.name or "").split(".")[0] or EXTRAS.get(extra, ("?",))[0]
    return MissingDependencyError(_message(name, extra, feature))


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` of an optional extra, or raise the error that names the extra.

    Parameters
    ----------
    module : str
        The module to import, e.g. ``"cvxpy"``.
    extra : str
        The extra of ``fairpca_dist`` that installs it, e.g. ``"conic"``.
    feature : str
        What needs it, e.g. ``"method 'samadi-sdp'"``.

    Returns
    -------
    types.ModuleType
        The imported module.

    Raises
    ------
    MissingDependencyError
        ``module`` (or a package it needs) cannot be imported; the message names the package and
        ``pip install "fairpca_dist[<extra>]"``.

    Examples
    --------
    >>> np = require("numpy", extra="core", feature="this example")
    >>> require("no_such_module_xyz", extra="conic", feature="method 'samadi-sdp'")
    Traceback (most recent call last):
    ...
    fairpca_dist.exceptions.MissingDependencyError: the package no_such_module_xyz is not installed (needed for method 'samadi-sdp'): pip install "fairpca_dist[conic]"
    """  # noqa: E501 - a doctest's output is one line
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise missing_dependency(error, extra=extra, feature=feature) from error


def check_installed(*modules: str, extra: str, feature: str) -> None:
    """Raise unless every one of ``modules`` is installed, without importing them.

    For a feature whose packages are slow to import (Prefect: 1-2 s), checked before any work.

    Parameters
    ----------
    *modules : str
        Top-level import names, e.g. ``"prefect", "prefect_dask"``.
    extra : str
        The extra that installs them.
    feature : str
        What needs them, e.g. ``"the Prefect flows"``.

    Raises
    ------
    MissingDependencyError
        Naming the first module that is missing and ``pip install "fairpca_dist[<extra>]"``.

    Examples
    --------
    >>> check_installed("numpy", "scipy", extra="core", feature="this example")
    """
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or a module without a spec
            found = False
        if not found:
            raise MissingDependencyError(_message(module, extra, feature))
