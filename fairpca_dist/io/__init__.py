"""Tables and files: the storage layer and everything that reads or writes through it.

:mod:`~fairpca_dist.io.storage` names local paths and object-store URLs alike;
:mod:`~fairpca_dist.io.atomic` and :mod:`~fairpca_dist.io.versions` make every output
complete or absent; :mod:`~fairpca_dist.io.ingest` turns a CSV or Parquet source into the
pipeline's table; :mod:`~fairpca_dist.io.model_io` reads and writes ``model.json``.
"""
