"""Tables on object stores are read exactly like local ones (fairpca_dist.io.storage, sources).

Against the real S3 server of tests/s3_server.py (fixtures ``s3``, ``s3_bucket``) and
fsspec's ``memory://``: the Default of Credit Card Clients table as a Parquet folder, a Parquet
glob, a CSV, a gzipped CSV and a CSV glob gives the moments it gives read from the local disk,
with the store's endpoint and keys from the environment or from ``storage_options``; a missing
bucket, wrong keys, an endpoint that does not answer, an unknown scheme and a scheme whose
package is missing are refused when the table is opened, in one line naming the URL and never
the secret.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest

from fairpca_dist import AccessError, CellMoments, GroupMoments, HashCells, InputError, ServiceError, compute_moments
from fairpca_dist.engine import memory
from fairpca_dist.engine.sources import open_table
from fairpca_dist.io.atomic import atomic_directory
from fairpca_dist.io.storage import local_path, locate
from fairpca_dist.params import check_run_parameters

AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
CELLS = "fold"
ROWS = 12_000  # of the 30,000: the moto server takes a second to store 3 MB
# (path in the table folder, read options): a Parquet folder of 4 files, their glob, one CSV read
# in blocks, a gzipped CSV (one partition), a glob of 3 CSV files
SOURCES = [
    ("parquet", {}),
    ("parquet/*.parquet", {}),
    ("credit.csv", {"blocksize": 250_000}),
    ("credit.csv.gz", {}),
    ("csv/part-*.csv", {}),
]


@pytest.fixture(scope="module")
def local_table(credit_frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The credit table's first :data:`ROWS` rows, with a cell label per row, in every layout
    of :data:`SOURCES`."""
    frame = credit_frame.head(ROWS).assign(**{CELLS: np.arange(ROWS) % 5})
    folder = tmp_path_factory.mktemp("credit")
    (folder / "parquet").mkdir()
    (folder / "csv").mkdir()
    for i, part in enumerate(_parts(frame, 4)):
        part.to_parquet(folder / "parquet" / f"part-{i}.parquet", index=False)
    for i, part in enumerate(_parts(frame, 3)):
        part.to_csv(folder / "csv" / f"part-{i}.csv", index=False)
    frame.to_csv(folder / "credit.csv", index=False)
    frame.to_csv(folder / "credit.csv.gz", index=False, compression="gzip")
    return folder


def _parts(frame: pd.DataFrame, n: int) -> list[pd.DataFrame]:
    bounds = np.linspace(0, len(frame), n + 1).astype(int)
    return [frame.iloc[start:stop] for start, stop in zip(bounds[:-1], bounds[1:], strict=True)]


@pytest.fixture(scope="module")
def bucket_table(s3, local_table: Path) -> str:
    """:func:`local_table` uploaded to a new bucket: its URL."""
    url = f"s3://{s3.new_bucket()}/credit"
    fsspec.filesystem("s3").put(f"{local_table}/", url + "/", recursive=True)
    return url


@pytest.fixture
def explicit(s3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The server's endpoint and keys as storage options, none of them in the environment, and
    no filesystem made from it: fsspec keeps instances, and one made when the environment had
    them would serve a reader that was not given the options."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    s3fs = pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credentials: fail at once, not after asking EC2
    s3fs.S3FileSystem.clear_instance_cache()
    return {"endpoint_url": s3.endpoint, "key": s3.key, "secret": s3.secret}


def assert_same_moments(found: GroupMoments | CellMoments, expected: GroupMoments | CellMoments) -> None:
    """Equal to 1e-12 (relative to each array's largest value): groups, cells, counts, means, scatters."""
    if isinstance(expected, CellMoments):
        assert isinstance(found, CellMoments) and found.cells == expected.cells
        for cell in expected.cells:
            assert_same_moments(found[cell], expected[cell])
        return
    assert found.groups == expected.groups and found.feature_names == expected.feature_names
    np.testing.assert_array_equal(found.count, expected.count)
    for name in ("weight", "mean", "scatter"):
        want = getattr(expected, name)
        np.testing.assert_allclose(
            getattr(found, name), want, rtol=1e-12, atol=1e-12 * np.abs(want).max(), err_msg=name
        )


@pytest.mark.parametrize(("path", "read_options"), SOURCES, ids=[path for path, _ in SOURCES])
def test_a_table_in_a_bucket_reads_as_on_the_local_disk(local_table, bucket_table, path, read_options):
    """Endpoint and keys from the environment (AWS_*), as a user on a cluster has them."""
    remote = open_table(f"{bucket_table}/{path}", sensitive_feature="education", read_options=read_options)
    local = open_table(str(local_table / path), sensitive_feature="education", read_options=read_options)
    assert remote.n_partitions == local.n_partitions
    assert remote.n_partitions > 1 or path.endswith(".gz")  # a gzipped CSV cannot be split
    found = compute_moments(f"{bucket_table}/{path}", sensitive_feature="education", read_options=read_options)
    assert_same_moments(
        found, compute_moments(str(local_table / path), sensitive_feature="education", read_options=read_options)
    )


@pytest.mark.parametrize("cells", [CELLS, HashCells(("LIMIT_BAL", "AGE"), n_cells=7)], ids=["column", "hash"])
@pytest.mark.parametrize(("path", "read_options"), [SOURCES[1], SOURCES[3]], ids=["parquet-glob", "csv-gz"])
def test_cells_from_a_bucket_with_storage_options(local_table, bucket_table, explicit, path, read_options, cells):
    """Endpoint and keys as storage options only: Dask's readers get them too."""
    found = compute_moments(
        f"{bucket_table}/{path}",
        sensitive_feature="education",
        read_options=read_options,
        cells=cells,
        storage_options=explicit,
    )
    assert_same_moments(
        found,
        compute_moments(str(local_table / path), sensitive_feature="education", read_options=read_options, cells=cells),
    )


def test_sliced_row_groups_and_footers_are_read_with_the_storage_options(local_table, bucket_table, explicit):
    """A row group larger than a partition is read in slices, and the size of a pass is found
    from the files' footers, both on the table's filesystem with the user's options."""
    sliced = {"blocksize": "256 KiB"}
    found = compute_moments(
        f"{bucket_table}/parquet", sensitive_feature="education", read_options=sliced, storage_options=explicit
    )
    assert_same_moments(found, compute_moments(str(local_table / "parquet"), sensitive_feature="education"))
    whole_files = {"split_row_groups": False}
    remote = open_table(
        f"{bucket_table}/parquet", sensitive_feature="education", read_options=whole_files, storage_options=explicit
    )
    local = open_table(str(local_table / "parquet"), sensitive_feature="education", read_options=whole_files)
    assert memory.frame_partition_size(remote.frame) == memory.frame_partition_size(local.frame) is not None


def test_memory_urls_read_as_the_local_disk(local_table):
    url = f"memory://fairpca-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    fs.put(f"{local_table}/", url + "/", recursive=True)
    try:
        for path, read_options in SOURCES:
            found = compute_moments(
                f"{url}/{path}", sensitive_feature="education", read_options=read_options, cells=CELLS
            )
            assert_same_moments(
                found,
                compute_moments(
                    str(local_table / path), sensitive_feature="education", read_options=read_options, cells=CELLS
                ),
            )
    finally:
        fs.rm(url, recursive=True)


def test_an_output_of_the_library_is_read_at_its_committed_version(local_table, s3_bucket):
    """A versioned folder (versions.committed) is read at the version its pointer names, not
    with a dead writer's version folder beside it."""
    url = f"{s3_bucket}/out"
    fs = fsspec.filesystem("s3")
    with atomic_directory(url, inputs=[], marker="_SUCCESS") as version:
        fs.put(f"{local_table / 'parquet'}/", f"{version.dask_url}/", recursive=True)
        version.fs.touch(f"{version.path}/_SUCCESS")
    fs.put(str(local_table / "parquet" / "part-0.parquet"), f"{url}/v-0123456789ab/part-9.parquet")  # a dead writer's
    found = compute_moments(url, sensitive_feature="education")
    assert_same_moments(found, compute_moments(str(local_table / "parquet"), sensitive_feature="education"))


def test_run_parameters_check_a_source_in_a_bucket(s3, bucket_table):
    """Through the storage layer (the keys from the environment: a flow refuses them as options)."""
    options = {"endpoint_url": s3.endpoint}
    check_run_parameters(source=f"{bucket_table}/parquet", storage_options=options)
    check_run_parameters(source=f"{bucket_table}/csv/*.csv", storage_options=options)
    with pytest.raises(InputError, match=r"input path 's3://\S+/nope' does not exist"):
        check_run_parameters(source=f"{bucket_table}/nope", storage_options=options)


WRONG_SECRET = f"not-the-secret-{uuid.uuid4().hex[:8]}"


def _wrong_secret(s3) -> dict:
    return {"endpoint_url": s3.endpoint, "key": s3.key, "secret": WRONG_SECRET}


def _endpoint_down(s3) -> dict:
    """A closed port, asked once with a 1 s timeout (botocore retries for minutes by default)."""
    return {
        **_wrong_secret(s3),
        "endpoint_url": "http://127.0.0.1:9",
        "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}},
    }


def _no_options(s3) -> None:
    return None


_NO_BUCKET = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}"
# id: (URL in the table's bucket ({table}) or elsewhere, its storage options, error class, what
# the message says of the URL)
REFUSALS = {
    "missing-bucket": (
        f"{_NO_BUCKET}/credit/parquet",
        _no_options,
        InputError,
        "does not exist: its bucket does not exist",
    ),
    "missing-bucket-glob": (
        f"{_NO_BUCKET}/*.csv",
        _no_options,
        InputError,
        "does not exist: its bucket does not exist",
    ),
    "missing-object": ("{table}/no-such.csv", _no_options, InputError, "does not exist"),
    "wrong-secret": (
        "{table}/parquet",
        _wrong_secret,
        AccessError,
        "access denied by the store: check the credentials",
    ),
    "wrong-secret-csv": ("{table}/credit.csv.gz", _wrong_secret, AccessError, "access denied by the store"),
    "wrong-secret-glob": ("{table}/csv/*.csv", _wrong_secret, AccessError, "access denied by the store"),
    "endpoint-down": ("{table}/parquet", _endpoint_down, ServiceError, "cannot reach the storage service"),
    "unknown-scheme": ("nosuchscheme://bucket/table.csv", _no_options, InputError, "unknown storage scheme"),
    "gs-without-gcsfs": ("gs://bucket/table.csv", _no_options, InputError, "needs gcsfs, which is not installed"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_storage_refusals_name_the_url_when_the_table_is_opened(s3, bucket_table, case):
    """Raised by open_table, which reads no rows: before any pass. One line, the URL, no secret."""
    if case == "gs-without-gcsfs" and importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed here")
    url, options, error, says = REFUSALS[case]
    url = url.format(table=bucket_table)
    with pytest.raises(error) as raised:
        open_table(url, sensitive_feature="education", storage_options=options(s3))
    message = str(raised.value)
    assert "\n" not in message and repr(url) in message and says in message, message
    assert WRONG_SECRET not in message and s3.secret not in message, message


def test_storage_options_in_read_options_are_refused_without_showing_them(local_table):
    with pytest.raises(InputError, match=r"as storage_options=\.\.\., not in read_options") as raised:
        open_table(str(local_table / "credit.csv"), read_options={"storage_options": {"secret": WRONG_SECRET}})
    assert WRONG_SECRET not in str(raised.value)


@pytest.mark.parametrize(
    ("url", "parent", "child"),
    [
        ("lateq", ".", "lateq.x"),  # a relative path of one part: the current folder, not itself
        ("lateq/", ".", "lateq.x"),
        ("runs/lateq", "runs", "runs/lateq.x"),
        (".", "..", None),  # named as the current folder is: "../<its name>.x"
        ("/tmp/lateq", "/tmp", "/tmp/lateq.x"),
        ("/", "/", "/.x"),  # the root is its own parent
        ("file:///tmp/lateq", "file:///tmp", "file:///tmp/lateq.x"),
        ("s3://bucket/runs/lateq", "s3://bucket/runs", "s3://bucket/runs/lateq.x"),
    ],
)
def test_a_parent_is_named_as_the_user_would_and_is_where_its_path_is(url, parent, child):
    location = locate(url)
    assert location.parent.url == parent
    assert (location.parent / f"{location.name}.x").url == (child or f"../{Path.cwd().name}.x")
    if location.local:
        assert location.parent.path == os.path.dirname(os.path.abspath(local_path(url).rstrip("/")) or "/") or "/"
