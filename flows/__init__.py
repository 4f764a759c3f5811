"""Prefect flows of the fairpca_dist pipeline: ingest → fit → project → report.

Installed as ``fairpca_dist.flows`` (the repository's ``flows/`` folder, which Prefect
deployments name by path). Each flow is a thin layer over one library function (DESIGN.md
rule 4); tasks pass paths, never data. ``pipeline`` runs all four on a Dask cluster through
prefect-dask.

Importing this package changes nothing and imports no Prefect: a command launches its
temporary API server (:mod:`fairpca_dist.flows.api_server`, standard library only) before it
imports Prefect. Prefect's defaults for this library
(:data:`fairpca_dist.flows.runtime.PREFECT_DEFAULTS`) are applied when a command starts its
API server (:func:`fairpca_dist.flows.runtime.api_server`), the way ``fairpca pipeline`` does,
and when a flow is called from Python (:func:`fairpca_dist.flows.runtime.flow`).
"""

from fairpca_dist.extras import check_installed

check_installed("prefect", "prefect_dask", "distributed", extra="flows", feature="the Prefect flows (fairpca pipeline)")
