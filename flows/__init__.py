"""Prefect flows of the fairpca_dist pipeline: ingest → fit → project → report.

Each flow is a thin layer over one library function (DESIGN.md rule 4); tasks pass paths,
never data. ``pipeline`` runs all four on a Dask cluster through prefect-dask.

Importing this package applies :data:`flows.runtime.PREFECT_DEFAULTS` to the Prefect
settings the user has not set (a longer startup timeout for the temporary API server, no
server telemetry); see :mod:`flows.runtime`.
"""

from flows.runtime import apply_prefect_defaults

apply_prefect_defaults()
