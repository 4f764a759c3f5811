"""Prefect flows of the fairpca_dist pipeline: ingest → fit → project → report.

Each flow is a thin layer over one library function (DESIGN.md rule 4); tasks pass paths,
never data. ``pipeline`` runs all four on a Dask cluster through prefect-dask.
"""
