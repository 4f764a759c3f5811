"""deploy/prefect.yaml end to end, with real components on loopback.

A Prefect server (own PREFECT_HOME), a Dask scheduler with two single-threaded workers, the
`fairpca-process` work pool, `prefect --no-prompt deploy` of the pipeline deployment `credit`
from deploy/prefect.yaml, a process worker started outside the repository (so the
`set_working_directory` pull step must put the flow run in the repo), and a run triggered
with `prefect deployment run`. Every process lives in this test's own environment
(``PREFECT_*`` variables of the pytest process are not passed on, and none are set in it),
and all of them, with their children, are stopped at the end, pass or fail.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import CREDIT_CSV, DATA_DIR, require_data
from processes import Processes, executable, free_ports

REPO = Path(__file__).resolve().parents[2]
PREFECT_FILE = REPO / "deploy" / "prefect.yaml"
POOL = "fairpca-process"
FLOW_NAME = "fairpca-pipeline"
DEPLOYMENT = "credit"
TARGET = "default payment next month"
RUN_TIMEOUT_S = 150
FINAL_STATES = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _get_json(url: str, payload: dict[str, Any] | None = None) -> Any:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="GET" if payload is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def _wait_for(what: str, condition, timeout: float, processes: Processes, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        processes.check_alive()
        try:
            value = condition()
        except (OSError, urllib.error.URLError, ValueError):
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{processes.logs()}")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Stack:
    """Handles of the running services."""

    def __init__(
        self,
        root: Path,
        processes: Processes,
        api_url: str,
        scheduler: str,
        base_env: dict[str, str],
        timings: dict[str, float],
    ):
        self.root, self.processes, self.api_url, self.scheduler = root, processes, api_url, scheduler
        self.base_env, self.timings = base_env, timings

    def prefect(
        self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [executable("prefect"), *args],
            cwd=cwd or self.root,
            env=env or self.base_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            raise AssertionError(
                f"prefect {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    """Prefect server + Dask scheduler + 2 Dask workers, started in parallel; stopped at the end."""
    root = tmp_path_factory.mktemp("deployment")
    (root / "logs").mkdir()
    processes = Processes(root / "logs")
    api_port, dask_port = free_ports(2)
    api_url = f"http://127.0.0.1:{api_port}/api"
    scheduler = f"tcp://127.0.0.1:{dask_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DASK_"))}
    env.update(
        PREFECT_HOME=str(root / "prefect-home"),
        PREFECT_API_URL=api_url,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_ENABLED="false",
        PREFECT_CLI_PROMPT="false",
        PREFECT_WORKER_QUERY_SECONDS="1",
        OPENBLAS_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    server_env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
    clock = time.monotonic()
    try:
        processes.start(
            "prefect-server",
            [executable("prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(api_port)],
            env=server_env,
            cwd=root,
        )
        processes.start(
            "dask-scheduler",
            [executable("dask"), "scheduler", "--host", "127.0.0.1", "--port", str(dask_port), "--no-dashboard"],
            env=env,
            cwd=root,
        )
        for i in range(2):
            processes.start(
                f"dask-worker-{i}",
                [
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
                    "--local-directory",
                    str(root / f"dask-{i}"),
                ],
                env=env,
                cwd=root,
            )
        _wait_for("the Prefect API health check", lambda: _get_json(f"{api_url}/health") is True, 120, processes)
        _wait_for("the Dask scheduler port", lambda: _port_open(dask_port), 60, processes)

        from distributed import Client

        with Client(scheduler, set_as_default=False, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield Stack(root, processes, api_url, scheduler, env, {"server + dask up": time.monotonic() - clock})
    finally:
        processes.stop()


def _flow_run_logs(api_url: str, flow_run_id: str) -> str:
    try:
        logs = _get_json(
            f"{api_url}/logs/filter",
            {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_ASC", "limit": 200},
        )
    except (OSError, urllib.error.URLError):
        return "(could not read flow-run logs)"
    return "\n".join(f"{log['level']:>3} {log['message']}" for log in logs)[-6000:]


class DeployedRun:
    """What the deployed run left behind."""

    def __init__(self, stack: Stack, flow_run_id: str, run_dir: Path, runs_dir: Path, timings: dict[str, float]):
        self.stack, self.flow_run_id, self.run_dir, self.runs_dir, self.timings = (
            stack,
            flow_run_id,
            run_dir,
            runs_dir,
            timings,
        )


@pytest.fixture(scope="module")
def deployed_run(stack: Stack, tmp_path_factory) -> DeployedRun:
    """Work pool, `prefect deploy` of pipeline/credit from deploy/prefect.yaml, a process worker,
    `prefect deployment run`, and the wait for a final state."""
    require_data(CREDIT_CSV)
    work = tmp_path_factory.mktemp("deployed-run")
    runs_dir = work / "runs"
    run_id = "it-credit"
    timings: dict[str, float] = {}
    clock = time.monotonic()

    stack.prefect("work-pool", "create", POOL, "--type", "process")
    # The worker starts (while we deploy) in a scratch folder: only the pull step
    # ({{ $FAIRPCA_ROOT }}, from the worker's environment) leads the flow run to the code.
    worker_cwd = work / "worker-cwd"
    worker_cwd.mkdir()
    stack.processes.start(
        "prefect-worker",
        [executable("prefect"), "worker", "start", "--pool", POOL, "--name", "it-worker"],
        env={**stack.base_env, "FAIRPCA_ROOT": str(REPO)},
        cwd=worker_cwd,
    )
    # The shipped parameters, except where outputs go and which cluster to use; the source comes
    # from the file's {{ $FAIRPCA_DATA }} template. A 1 MB CSV block size splits the table into
    # partitions (Parquet files), so both workers can get work and moments are cached per file.
    overrides = {
        "runs_dir": str(runs_dir),
        "dask_address": stack.scheduler,
        "read_options": {"header": 1, "blocksize": 1_000_000},
    }
    deployed = stack.prefect(
        "--no-prompt",
        "deploy",
        "--prefect-file",
        str(PREFECT_FILE.relative_to(REPO)),
        "--name",
        f"pipeline/{DEPLOYMENT}",
        "--params",
        json.dumps(overrides),
        cwd=REPO,
        env={**stack.base_env, "FAIRPCA_DATA": str(DATA_DIR.resolve())},
    )
    assert f"{FLOW_NAME}/{DEPLOYMENT}" in deployed.stdout, deployed.stdout
    timings["work pool + worker + deploy"] = time.monotonic() - clock

    clock = time.monotonic()
    triggered = stack.prefect("deployment", "run", f"{FLOW_NAME}/{DEPLOYMENT}", "--param", f"run_id={run_id}")
    match = re.search(r"UUID:\s*([0-9a-f-]{36})", triggered.stdout)
    assert match, triggered.stdout
    flow_run_id = match.group(1)

    def final_state() -> str | None:
        state = _get_json(f"{stack.api_url}/flow_runs/{flow_run_id}")["state"]
        return state["type"] if state and state["type"] in FINAL_STATES else None

    state = _wait_for(f"flow run {flow_run_id} to finish", final_state, RUN_TIMEOUT_S, stack.processes, 0.5)
    timings["trigger -> final state"] = time.monotonic() - clock
    print("deployment test timings (s):", {k: round(v, 1) for k, v in {**stack.timings, **timings}.items()})
    assert state == "COMPLETED", (
        f"flow run ended {state} after {timings['trigger -> final state']:.0f} s\n"
        f"{_flow_run_logs(stack.api_url, flow_run_id)}\n"
        f"{stack.processes.logs('prefect-worker', 'dask-worker-0', 'dask-worker-1')}"
    )
    return DeployedRun(stack, flow_run_id, runs_dir / run_id, runs_dir, timings)


def test_deployment_carries_the_file_settings(deployed_run: DeployedRun) -> None:
    deployment = _get_json(f"{deployed_run.stack.api_url}/deployments/name/{FLOW_NAME}/{DEPLOYMENT}")
    parameters = deployment["parameters"]
    assert parameters["source"] == str(
        DATA_DIR.resolve() / "pelegrina_fpca" / "default_degree.csv"
    )  # {{ $FAIRPCA_DATA }}
    assert parameters["sensitive_feature"] == ["SEX"] and parameters["target"] == TARGET
    assert parameters["runs_dir"] == str(deployed_run.runs_dir)  # --params merged into the file's
    assert deployment["work_pool_name"] == POOL
    assert deployment["job_variables"]["env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert deployment["pull_steps"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $FAIRPCA_ROOT }}"}}
    ]


def test_run_writes_every_output(deployed_run: DeployedRun) -> None:
    run = deployed_run.run_dir  # named by the run-time parameter run_id
    for path in [
        "table/schema.json",
        "model/model.json",
        "model/model.npz",
        "model/moments.npz",
        "projected/_SUCCESS",
        "report/report.json",
        "report/report.md",
        "report/report.html",
    ]:
        assert (run / path).is_file(), f"{path} missing; run folder holds {sorted(str(p) for p in run.rglob('*'))}"
    schema = json.loads((run / "table" / "schema.json").read_text())
    assert schema["rows"] == 30000 and schema["rejected"] == 0
    assert schema["sensitive_feature"] == ["SEX"] and len(schema["features"]) == 22
    assert len(schema["partitions"]) >= 2
    # ingest wrote one moments file per Parquet file into the table, and the fit computed none
    assert len(list((run / "table" / "moments").glob("*.npz"))) == len(schema["partitions"])
    assert not (deployed_run.runs_dir / ".moments-cache").exists()
    record = json.loads((run / "model" / "model.json").read_text())
    assert record["method"] == "fair-eig" and record["n_components"] == 2
    assert json.loads((run / "report" / "report.json").read_text())


def test_tasks_report_to_the_server(deployed_run: DeployedRun) -> None:
    api = deployed_run.stack.api_url
    children = _get_json(
        f"{api}/flow_runs/filter",
        {"flow_runs": {"parent_flow_run_id": {"any_": [deployed_run.flow_run_id]}}, "limit": 10},
    )
    ids = [deployed_run.flow_run_id, *(r["id"] for r in children)]
    task_runs = _get_json(f"{api}/task_runs/filter", {"flow_runs": {"id": {"any_": ids}}, "limit": 50})
    states = {r["name"]: r["state"]["type"] if r["state"] else None for r in task_runs}
    completed = {name.rsplit("-", 1)[0] for name, state in states.items() if state == "COMPLETED"}
    assert {"ingest-table", "fit-model", "project-table", "fairness-report"} <= completed, states
    for name in ("dask-worker-0", "dask-worker-1"):  # PREFECT_API_URL was used, no ephemeral server
        log = (deployed_run.stack.processes.log_dir / f"{name}.log").read_text(errors="replace")
        assert "temporary server" not in log.lower(), deployed_run.stack.processes.logs(name)


def test_deployed_model_equals_the_library(deployed_run: DeployedRun, tmp_path: Path) -> None:
    from fairpca_dist import compute_moments, fit_projection, load_model
    from fairpca_dist.fitting import fit_table

    run = deployed_run.run_dir
    model = load_model(run / "model")
    # the library on the same ingested table, in this process (threads, no Prefect, no cluster)
    direct = fit_table(
        run / "table",
        tmp_path / "model",
        method="fair-eig",
        n_components=2,
        center="group",
        standardize=True,
        cache_dir=tmp_path / "cache",
    )
    assert model.feature_names == direct.feature_names and model.group_labels == direct.group_labels
    for name in ("components", "mean", "scale", "group_count", "group_loss"):
        np.testing.assert_allclose(getattr(model, name), getattr(direct, name), rtol=1e-12, atol=1e-12, err_msg=name)

    # and from the CSV held in memory by pandas: no ingest, no Parquet, no Dask
    frame = pd.read_csv(CREDIT_CSV, header=1)
    features = list(model.feature_names)
    reference = fit_projection(
        compute_moments(frame, sensitive_feature="SEX", features=features),
        2,
        method="fair-eig",
        center="group",
        standardize=True,
    )
    np.testing.assert_allclose(model.components, reference.components, atol=1e-8)
    np.testing.assert_allclose(model.group_loss, reference.group_loss, rtol=1e-8)
    projected = pd.read_parquet(run / "projected").sort_values("ID")
    assert len(projected) == 30000 and {"ID", TARGET} <= set(projected.columns)
    columns = [c for c in projected.columns if c not in ("ID", TARGET)]
    np.testing.assert_allclose(
        projected[columns].to_numpy(), reference.transform(frame.sort_values("ID")[features].to_numpy()), atol=1e-8
    )


def test_dask_workers_do_the_work(deployed_run: DeployedRun) -> None:
    """dask_address reaches the pipeline's task runner: both workers executed the passes over rows
    (the library's graphs), not the flow-run process's threads; the Prefect tasks ran in the flow-run
    process, so the workers never imported Prefect (they need neither it nor a route to its API)."""
    from distributed import Client

    with Client(deployed_run.stack.scheduler, set_as_default=False, timeout=30) as client:
        executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
        prefect_imported = client.run(lambda: "prefect" in __import__("sys").modules)
    assert len(executed) == 2 and all(n > 0 for n in executed.values()), executed
    assert not any(prefect_imported.values()), prefect_imported
