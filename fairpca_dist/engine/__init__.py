"""The row engine: every pass over a table's rows, on Dask or in memory.

:func:`~fairpca_dist.engine.passes.compute_moments` reads a table once and returns per-group
sufficient statistics (:class:`~fairpca_dist.engine.moments.GroupMoments`, or
:class:`~fairpca_dist.engine.cells.CellMoments` per intersectional cell); the row-reading
solvers reach further passes through :mod:`fairpca_dist.engine.datapasses`. Sources
(:mod:`~fairpca_dist.engine.sources`) turn arrays, pandas and dask frames and Parquet/CSV
paths into partitions; :mod:`~fairpca_dist.engine.memory` checks a pass fits on its workers.
"""
