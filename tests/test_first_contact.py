"""First contact: on a new machine (no Prefect home, no Prefect settings, no services) the
commands and the flows work on the first try and the second, and print what a person wants
to read. Each test runs the real thing in a subprocess with a Prefect home that does not
exist yet, so Prefect starts its temporary API server and creates its database there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

STEPS = ["dask", "ingest", "fit", "project", "report"]


def new_machine_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any Prefect setting, and a new Prefect home."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    return {**env, "PREFECT_HOME": str(home), **extra}


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def fairpca(*args: str) -> list[str]:
    return [sys.executable, "-m", "fairpca_dist.cli", *args]


def step_events(out: str) -> list[tuple[str, str]]:
    return [
        (line.split()[0], line.split()[1])
        for line in out.splitlines()
        if line.startswith("  ") and line.split() and line.split()[0] in STEPS
    ]


def test_demo_then_pipeline_on_a_new_prefect_home(tmp_path):
    home = tmp_path / "prefect-home"
    env = new_machine_env(home)

    first = run(fairpca("demo", "--runs-dir", "runs", "--run-id", "first"), env, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "database created (first run)" in first.stdout
    assert step_events(first.stdout) == [(name, event) for name in STEPS for event in ("started", "done")]
    assert "fair-eig is judged by its own criterion: max group loss" in first.stdout and "finished in" in first.stdout
    assert re.search(r"fit +done in [\d.]+ s: fair-eig r=2, max group loss \(lower is fairer\) [\d.]+ ", first.stdout)
    # Quiet by default: nothing from Prefect, Dask or distributed, and no traceback.
    assert first.stderr == ""
    assert (tmp_path / "runs" / "first" / "report" / "report.json").is_file()

    # The second run on the same home, through `fairpca pipeline`, with the full logs.
    source = tmp_path / "runs" / "first" / "diabetes.csv"
    second = run(
        fairpca(
            "pipeline",
            str(source),
            "--sensitive-feature",
            "sex",
            "--key-columns",
            "patient",
            "--target",
            "high_progression",
            "--runs-dir",
            "runs",
            "--run-id",
            "second",
            "-v",
        ),
        env,
        tmp_path,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert "temporary Prefect API server started" in second.stdout and "first run" not in second.stdout
    assert "Beginning flow run" in second.stderr and "distributed.scheduler" in second.stderr
    assert re.search(r"finished in [\d.]+ s: checks [\d.]+ s, imports .* ingest [\d.]+ s, fit", second.stdout)
    assert "Traceback" not in second.stdout + second.stderr
    first_report = json.loads((tmp_path / "runs" / "first" / "report" / "report.json").read_text())
    second_report = json.loads((tmp_path / "runs" / "second" / "report" / "report.json").read_text())
    assert second_report["model"] == first_report["model"]

    # Bad input found inside the flow (in the ingest task): one line naming file and column, and
    # no run folder left behind.
    bad = tmp_path / "bad.csv"
    bad.write_text(source.read_text().replace("\n0,59.0,", "\n0,59.0x,", 1))
    third = run(
        fairpca(
            "pipeline", str(bad), "--sensitive-feature", "sex", "--features", "age", "bmi", "--runs-dir", "bad-runs"
        ),
        env,
        tmp_path,
    )
    assert third.returncode == 2, third.stdout + third.stderr
    assert third.stderr.count("\n") == 1 and third.stderr.startswith("fairpca: error: feature column 'age' in ")
    assert "bad.csv" in third.stderr
    assert not any((tmp_path / "bad-runs").glob("*"))


def test_pipeline_on_an_existing_dask_cluster_uses_one_prefect_server(tmp_path):
    """With a temporary API server and ``--dask-address`` (workers that did not inherit the
    command's environment), every task run reports to the command's server: no worker starts
    a Prefect server of its own (they did, on the same database, and a 10M-row run stalled).
    One worker of one thread: a step waiting on its own graphs must give the thread up."""
    import psutil
    from distributed import Client, LocalCluster

    from fairpca_dist.io.datasets import write_synthetic_parquet

    source = write_synthetic_parquet(tmp_path / "source", 20_000, rows_per_file=5_000)

    def prefect_servers() -> int:
        return sum("prefect.server" in " ".join(child.cmdline()) for child in psutil.Process().children(recursive=True))

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        result = run(
            fairpca(
                "pipeline",
                str(source),
                "--sensitive-feature",
                "group",
                "--key-columns",
                "row_id",
                "--runs-dir",
                "runs",
                "--run-id",
                "cluster",
                "--dask-address",
                cluster.scheduler_address,
            ),
            new_machine_env(tmp_path / "prefect-home"),
            tmp_path,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert sum(client.run(prefect_servers).values()) == 0
    assert "Starting temporary server" not in result.stdout + result.stderr
    assert (tmp_path / "runs" / "cluster" / "report" / "report.json").is_file()
