"""A cluster whose workers share no disk with the driver (issue 30).

A Dask scheduler and two single-threaded workers run as processes of their own (the ``dask``
command of this virtualenv). Each worker lives in a mount namespace of its own
(``unshare --mount --propagation private``) with a private tmpfs over the temporary folder,
which holds the driver's working folder: a file the driver writes there is not there for a
worker, and what a worker writes there stays in its tmpfs, out of the driver's sight. The
network is shared, so the workers reach the scheduler, the S3 server of the ``s3`` fixture and
the driver's Prefect API on loopback, as machines of one cluster would.

``fairpca pipeline`` then runs on S3 data against that scheduler, from an empty working folder
with a Prefect home that does not exist yet (a new user). A code path that writes a
driver-local path fails the test: run by a worker, its files land in that worker's tmpfs, which
the test searches (through ``/proc/<pid>/root``, the worker's own view) for files named like
the library's outputs; run by the driver, they land in its working folder, which must stay
empty. The outputs must be in the bucket, committed (``_CURRENT`` + one ``v-<hex>`` folder:
fairpca_dist.io.versions), and equal those of the same command on the same table on local disk.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from processes import Processes, executable, free_ports
from test_first_contact import new_machine_env

from fairpca_dist import load_model
from fairpca_dist.fitting import MOMENTS_CACHE
from fairpca_dist.io.datasets import synthetic_group_table
from fairpca_dist.io.ingest import table_source
from fairpca_dist.io.storage import locate
from fairpca_dist.io.versions import POINTER, committed, is_version_name

WORKERS = 2
OUTPUTS = ("table", "model", "projected", "report")
# names of the files the library writes (parts, schema, model, moments cache, report, markers)
OUR_FILES = ("*.parquet", "schema.json", "model.json", "*.npz", "report.*", "*.png", "_SUCCESS", POINTER, "rejects*")
RUN_TIMEOUT_S = 300


def _private_mounts(*folders: Path) -> list[Path]:
    """The folders a worker gets a tmpfs over: each of ``folders`` not inside another one."""
    mounts: list[Path] = []
    for folder in sorted({f.resolve() for f in folders}, key=lambda f: len(f.parts)):
        if not any(folder.is_relative_to(mount) for mount in mounts):
            mounts.append(folder)
    return mounts


def _in_private_namespace(mounts: list[Path], cwd: Path, command: list[str]) -> list[str]:
    """``command`` in a new mount namespace with a tmpfs over each of ``mounts``, started in
    ``cwd`` (created inside them). ``exec``: the process that ``Popen`` returns is the command,
    and it sees what the namespace holds at ``/proc/<pid>/root``."""
    script = " && ".join(
        [
            *(f"mount -t tmpfs fairpca-private {shlex.quote(str(m))}" for m in mounts),
            f"mkdir -p {shlex.quote(str(cwd))}",
            f"cd {shlex.quote(str(cwd))}",
            f"exec {shlex.join(command)}",
        ]
    )
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]


def _why_no_private_namespace(folder: Path) -> str | None:
    """Why a process cannot get a private tmpfs over ``folder`` here (not Linux, no unshare,
    not permitted), or None when it can."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "needs Linux and unshare(1) for private mount namespaces"
    probe = subprocess.run(
        _in_private_namespace([folder], folder / "probe", ["true"]), capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        return f"unshare --mount + mount -t tmpfs not permitted here: {probe.stderr.strip()}"
    return None


@dataclass
class PrivateCluster:
    """A running scheduler and workers that each see a private tmpfs over ``mounts``."""

    scheduler: str
    driver_dir: Path
    mounts: list[Path]
    workers: dict[str, subprocess.Popen[bytes]]
    processes: Processes

    def private_files(self) -> dict[str, list[str]]:
        """Every file in each worker's private tmpfs, by worker name, seen from inside its
        namespace (``/proc/<pid>/root``): the worker processes must still be running."""
        found: dict[str, list[str]] = {}
        for name, process in self.workers.items():
            assert process.poll() is None, self.processes.logs(name)
            root = Path(f"/proc/{process.pid}/root")
            found[name] = sorted(
                os.path.join(folder, file)[len(str(root)) :]
                for mount in self.mounts
                for folder, _, files in os.walk(root / mount.relative_to("/"))
                for file in files
            )
        return found


@pytest.fixture
def private_cluster(tmp_path: Path, s3) -> Iterator[PrivateCluster]:
    """A scheduler and ``WORKERS`` single-threaded workers, each worker in a mount namespace of
    its own with a private tmpfs over the temporary folder and the driver's working folder
    (``driver_dir``, empty). Every process, and so every namespace, is gone at the end."""
    reason = _why_no_private_namespace(tmp_path)
    if reason:
        pytest.skip(reason)
    driver_dir = tmp_path / "driver"
    driver_dir.mkdir()
    (tmp_path / "logs").mkdir()
    mounts = _private_mounts(Path(tempfile.gettempdir()), driver_dir)
    processes = Processes(tmp_path / "logs")
    (port,) = free_ports(1)
    scheduler = f"tcp://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DASK_"))}
    env.update(s3.env, OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    try:
        processes.start(
            "dask-scheduler",
            [executable("dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=env,
            cwd=tmp_path,
        )
        workers = {}
        for i in range(WORKERS):
            home = Path(tempfile.gettempdir()).resolve() / f"worker-{i}"  # inside the worker's tmpfs
            command = [
                executable("dask"),
                "worker",
                scheduler,
                "--name",
                f"worker-{i}",
                "--nthreads",
                "1",
                "--memory-limit",
                "2GB",
                "--no-dashboard",
            ]
            workers[f"dask-worker-{i}"] = processes.start(
                f"dask-worker-{i}",
                _in_private_namespace(mounts, home, command),
                env={**env, "PREFECT_HOME": str(home / "prefect-home")},
                cwd=tmp_path,
            )
        from distributed import Client

        sentinel = driver_dir / "driver-only"
        sentinel.write_text("the driver's disk")
        try:
            with Client(scheduler, set_as_default=False, timeout=30) as client:
                client.wait_for_workers(WORKERS, timeout=60)
                seen = client.run(os.path.exists, str(sentinel))
        except (OSError, TimeoutError) as error:
            raise AssertionError(f"the cluster did not start: {error}\n{processes.logs()}") from error
        finally:
            sentinel.unlink()
        assert not any(seen.values()), f"the workers see the driver's working folder: {seen}"
        for name, process in workers.items():
            assert os.readlink(f"/proc/{process.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"), name
        yield PrivateCluster(scheduler, driver_dir, mounts, workers, processes)
    finally:
        processes.stop()


def _ours(path: str, bucket: str) -> bool:
    """Whether ``path`` is named like something the library writes, or like a URL of the
    bucket turned into a local path (``./s3:/<bucket>/…``)."""
    name = os.path.basename(path)
    return any(fnmatch.fnmatch(name, pattern) for pattern in OUR_FILES) or "s3:" in path or bucket in path


def _parquet_rows(url: str) -> pd.DataFrame:
    """The rows of the Parquet files in the folder ``url`` (local or URL), in key order."""
    folder = locate(url)
    parts = sorted(entry.dask_url for entry in folder.listdir() if entry.name.endswith(".parquet"))
    assert parts, f"no Parquet parts in {folder.url}"
    frames = [pd.read_parquet(part, storage_options=folder.storage_options or None) for part in parts]
    return pd.concat(frames, ignore_index=True).sort_values("row_id", ignore_index=True)


def _assert_same_model(remote: str, local: Path) -> None:
    """The two saved models hold the same arrays (to 1e-9) and the same labels and settings."""
    a, b = load_model(remote), load_model(local)
    for field in fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-9, err_msg=field.name)
        elif field.name in ("method", "center", "n_components", "feature_names", "group_labels", "converged"):
            assert x == y, field.name


def _assert_close(a: object, b: object, where: str) -> None:
    """``a`` and ``b`` (parsed JSON) hold the same keys, lengths and values, numbers to 1e-9."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_close(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert b == pytest.approx(a, rel=0, abs=1e-9, nan_ok=True), where
    else:
        assert a == b, where


def _pipeline(source: str, runs_dir: str, cwd: Path, home: Path, *extra: str) -> subprocess.Popen[str]:
    """``fairpca pipeline`` on the test's table, started in ``cwd`` with a new Prefect home."""
    return subprocess.Popen(
        [
            executable("fairpca"),
            "pipeline",
            source,
            "--sensitive-feature",
            "group",
            "--key-columns",
            "row_id",
            "--target",
            "label",
            "--runs-dir",
            runs_dir,
            "--run-id",
            "r1",
            *extra,
        ],
        cwd=cwd,
        env=new_machine_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _finish(process: subprocess.Popen[str], what: str, cluster: PrivateCluster) -> None:
    try:
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    assert process.returncode == 0, (
        f"{what} exited with {process.returncode}\n{out[-4000:]}\n{err[-6000:]}\n"
        f"{cluster.processes.logs(*cluster.workers)}"
    )


@pytest.mark.slow  # 60-125 s on 2 cores: two new Prefect homes (temporary servers) and first imports on the workers
def test_pipeline_on_s3_with_workers_that_share_no_disk(
    private_cluster: PrivateCluster, s3, s3_bucket: str, tmp_path: Path
) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    frame = synthetic_group_table(3_000, n_features=4, seed=30)
    frame["label"] = (frame["f0"] > frame["f0"].median()).astype("int64")
    local = tmp_path / "local"
    (local / "source").mkdir(parents=True)
    for i in range(3):  # three partitions, for both workers to write
        part = frame.iloc[i * 1_000 : (i + 1) * 1_000]
        part.to_parquet(f"{s3_bucket}/source/part-{i}.parquet", index=False)
        part.to_parquet(local / "source" / f"part-{i}.parquet", index=False)

    # the same command on the same table on local disk (a cluster in the command's process), meanwhile
    local_run = _pipeline(str(local / "source"), "runs", local, tmp_path / "prefect-home-local")
    remote_run = _pipeline(
        f"{s3_bucket}/source",
        f"{s3_bucket}/runs",
        private_cluster.driver_dir,
        tmp_path / "prefect-home",
        "--dask-address",
        private_cluster.scheduler,
    )
    try:
        _finish(remote_run, "the pipeline on the cluster", private_cluster)
    finally:
        _finish(local_run, "the local pipeline", private_cluster)

    # nothing on the driver's disk, nothing of ours on the workers' disks
    driver_dir = private_cluster.driver_dir
    written = sorted(str(path.relative_to(driver_dir)) for path in driver_dir.rglob("*"))
    assert written == [], f"written under the driver's working folder: {written}"
    stray = {
        name: [path for path in files if _ours(path, bucket)] for name, files in private_cluster.private_files().items()
    }
    assert not any(stray.values()), f"files written on the workers' local disks: {stray}"

    # every output in the bucket, committed: _CURRENT and the one version it names
    keys = s3.keys(bucket)
    run_keys = [key for key in keys if key.startswith("runs/r1/")]
    for output in OUTPUTS:
        version = committed(locate(f"{s3_bucket}/runs/r1/{output}")).name
        assert is_version_name(version), output
        assert {key.split("/")[3] for key in run_keys if key.startswith(f"runs/r1/{output}/")} == {POINTER, version}
    assert {key.split("/")[2] for key in run_keys} == set(OUTPUTS)
    assert [key for key in keys if not key.startswith(("source/", "runs/r1/", f"runs/{MOMENTS_CACHE}/"))] == []

    # the outputs of the local run
    runs = local / "runs" / "r1"
    pd.testing.assert_frame_equal(
        _parquet_rows(table_source(f"{s3_bucket}/runs/r1/table")),
        _parquet_rows(table_source(runs / "table")),
        check_exact=False,
        rtol=0,
        atol=1e-9,
    )
    _assert_same_model(f"{s3_bucket}/runs/r1/model", runs / "model")
    pd.testing.assert_frame_equal(
        _parquet_rows(committed(locate(f"{s3_bucket}/runs/r1/projected")).url),
        _parquet_rows(str(runs / "projected")),
        check_exact=False,
        rtol=0,
        atol=1e-9,
    )
    report = committed(locate(f"{s3_bucket}/runs/r1/report"))
    assert sorted(entry.name for entry in report.listdir()) == sorted(os.listdir(runs / "report"))
    _assert_close(
        json.loads((report / "report.json").read_text()),
        json.loads((runs / "report" / "report.json").read_text()),
        "report.json",
    )
