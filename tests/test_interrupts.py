"""Interrupts: SIGINT (a terminal's Ctrl-C, sent to the command's whole process group) and SIGTERM
sent to a real ``fairpca`` process in the middle of ``ingest``, ``fit``, ``project`` and
``pipeline``, and SIGKILL of the pipeline.

The command runs under a hook that holds its first pass at one partition task until the test
releases it (marker files, never timings), so the signal always arrives mid-step. The pipeline
runs with its own temporary Prefect server (``PREFECT_API_URL`` unset; ``PREFECT_HOME`` is the
test session's). Each case checks one line on standard error, the exit status 128 + signal, no
staging folder or lock left, the previous output byte-identical and, for the pipeline, that no
process it started outlives it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from conftest import grouped_data

from fairpca_dist.cli import main

FEATURES = [f"f{j}" for j in range(5)]
WAIT = 120  # bound of every wait: a command that hangs fails the test instead of stalling it

# A `fairpca` command whose first partition task running `FUNCTION` (the per-partition function
# of a pass: sources._run_partition's first argument) creates `reached` and waits for `release`.
# Arguments: reached, release, FUNCTION, then the command line.
HELD_CLI = """
import os, sys, time
from pathlib import Path
from fairpca_dist.engine import sources
from fairpca_dist.cli import main

reached, release, function = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
real = sources._run_partition

def held_once(func, read, inputs, index, *rest):
    if func.__name__ == function:
        try:
            os.close(os.open(reached, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            deadline = time.monotonic() + 120
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
    return real(func, read, inputs, index, *rest)

sources._run_partition = held_once
sys.exit(main(sys.argv[4:]))
"""


def _environment() -> dict[str, str]:
    """This test session's, with a temporary Prefect server (no PREFECT_API_URL)."""
    return {**{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}, "OPENBLAS_NUM_THREADS": "1"}


def _snapshot(folder: Path, *, skip: str | None = None) -> dict[str, str]:
    """Every path under ``folder`` (but those under ``skip``) and a digest of its bytes."""
    return {
        str(path.relative_to(folder)): "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if skip is None or skip not in path.relative_to(folder).parts
    }


def _leftovers(folder: Path) -> list[str]:
    """Staging folders and lock files of writers, anywhere under ``folder``."""
    return [str(p) for p in folder.rglob(".*") if ".staging-" in p.name or p.name.endswith(".lock")]


class Held:
    """A ``fairpca`` process held in a pass (see ``HELD_CLI``), in a session of its own so that a
    signal to its process group reaches it and what it started, as a terminal's Ctrl-C does."""

    def __init__(self, tmp_path: Path, function: str, *argv: object) -> None:
        self.reached, self.release = tmp_path / "reached", tmp_path / "release"
        self.process = subprocess.Popen(
            [sys.executable, "-c", HELD_CLI, str(self.reached), str(self.release), function, *map(str, argv)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
            cwd=tmp_path,
            start_new_session=True,
        )
        deadline = time.monotonic() + WAIT
        while not self.reached.exists():
            assert self.process.poll() is None, self.process.communicate()
            assert time.monotonic() < deadline, "the command never reached the partition"
            time.sleep(0.01)
        self.descendants = psutil.Process(self.process.pid).children(recursive=True)

    def interrupt(self, signum: int) -> tuple[str, str]:
        """Send ``signum`` (SIGINT as a terminal does, to the process group; SIGTERM and SIGKILL
        to the process), release the partition in flight, return stdout and stderr."""
        if signum == signal.SIGINT:
            os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)
        self.release.touch()
        return self.process.communicate(timeout=WAIT)

    def survivors(self) -> list[psutil.Process]:
        """The processes it had started that are still alive after a bounded wait."""
        _, alive = psutil.wait_procs(self.descendants, timeout=15)
        return alive


def _assert_one_interrupt_line(process: subprocess.Popen, stderr: str, signum: int) -> None:
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines() == [
        f"fairpca: interrupted ({signal.Signals(signum).name}); unfinished outputs were removed, previous ones left "
        "as they were"
    ]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A source of 6 Parquet files (2400 rows, 2 groups), its ingested table, a model and the
    table's projection: the inputs of the steps, and the previous outputs they replace."""
    folder = tmp_path_factory.mktemp("interrupts")
    x, labels = grouped_data(n_rows=2400, n_features=5, n_groups=2, seed=3)
    frame = pd.DataFrame(x, columns=FEATURES).assign(group=labels)
    (folder / "source").mkdir()
    for i, start in enumerate(range(0, len(frame), 400)):
        frame.iloc[start : start + 400].to_parquet(folder / "source" / f"part-{i}.parquet", index=False)
    for argv in (
        ["ingest", folder / "source", folder / "table", "--sensitive-feature", "group"],
        ["fit", folder / "table", folder / "model", "--n-components", "2"],
        ["project", folder / "model", folder / "table", folder / "projected"],
    ):
        assert main([str(a) for a in argv]) == 0
    return folder


# Per command: its arguments (inputs from `work` or, for fit, a fresh copy of the table in `tmp`,
# without the moments ingest wrote into it and not cached yet), the function of its first pass's
# partition tasks, and the folder of `work` that is its previous output.
STEPS = {
    "ingest": (
        lambda work, tmp, out: ["ingest", work / "source", out, "--sensitive-feature", "group"],
        "_clean_partition",
        "table",
    ),
    "fit": (
        lambda work, tmp, out: ["fit", tmp / "table", out, "--n-components", "2"],
        "_apply_to_frame_chunk",
        "model",
    ),
    "project": (
        lambda work, tmp, out: ["project", work / "model", work / "table", out],
        "_project_partition",
        "projected",
    ),
}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", list(STEPS))
def test_an_interrupted_step_stops_in_one_line_and_keeps_the_previous_output(work, tmp_path, command, signum):
    arguments, function, previous = STEPS[command]
    # without the moments ingest wrote into it: the fit reads the rows (and can be interrupted there)
    shutil.copytree(work / "table", tmp_path / "table", ignore=shutil.ignore_patterns("moments"))
    out = tmp_path / "out"
    shutil.copytree(work / previous, out)
    before = _snapshot(out)
    held = Held(tmp_path, function, *arguments(work, tmp_path, out))
    _, stderr = held.interrupt(signum)
    _assert_one_interrupt_line(held.process, stderr, signum)
    assert _snapshot(out) == before
    assert _leftovers(tmp_path) == [] and _leftovers(work) == []


@pytest.fixture(scope="module")
def prefect_database() -> Path:
    """The Prefect database of this test session's PREFECT_HOME, created now if it is not yet
    (10-30 s; otherwise the first temporary server would, in the first pipeline test)."""
    database = Path(os.environ["PREFECT_HOME"]) / "prefect.db"
    if not database.exists():
        subprocess.run(
            [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
            env=_environment(),
            check=True,
            timeout=WAIT,
            capture_output=True,
        )
    return database


def _prefect_runs(database: Path, parameter: str) -> tuple[list[str], list[tuple[str, int, str]]]:
    """The states of the flow runs whose parameters mention ``parameter``, and the name, run
    count and state of each of their task runs, read from Prefect's database (its server is gone)."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        flows = connection.execute("SELECT id, state_name FROM flow_run WHERE instr(parameters, ?) > 0", (parameter,))
        flows = dict(flows.fetchall())
        tasks = connection.execute(
            f"SELECT name, run_count, state_name FROM task_run WHERE flow_run_id IN ({', '.join('?' * len(flows))})",
            list(flows),
        )
        return sorted(flows.values()), tasks.fetchall()


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_an_interrupted_pipeline_stops_with_its_prefect_server(work, tmp_path, prefect_database, signum):
    """Held in the fit, once ingest has written the run's table. SIGINT and SIGTERM: one line, the
    pipeline's and its steps' flow runs marked crashed (a Ctrl-C does not reach the temporary
    Prefect server: the command stops it afterwards), the new run folder removed, the previous
    run untouched. SIGKILL: nothing of the command runs, and its server exits by itself as its
    parent is gone."""
    runs = tmp_path / "runs"
    (runs / "previous").mkdir(parents=True)
    (runs / "previous" / "notes.txt").write_text("a previous run\n")
    before = _snapshot(runs)
    held = Held(
        tmp_path,
        "_apply_to_frame_chunk",
        "pipeline",
        work / "source",
        "--sensitive-feature",
        "group",
        "--runs-dir",
        runs,
        "--run-id",
        "new",
    )
    assert (runs / "new" / "table" / "schema.json").is_file()  # held in the fit step
    assert any("prefect.server" in " ".join(p.cmdline()) for p in held.descendants)  # its temporary server
    _, stderr = held.interrupt(signum)
    assert held.survivors() == []
    if signum == signal.SIGKILL:
        assert held.process.returncode == -signal.SIGKILL
        return
    _assert_one_interrupt_line(held.process, stderr, signum)
    flow_runs, task_runs = _prefect_runs(prefect_database, str(runs))
    assert flow_runs == ["Crashed"]  # the pipeline's one flow run (its steps are its tasks)
    assert {name.split("-")[0] for name, _, _ in task_runs} >= {"ingest", "fit"}
    assert all(count == 1 and state not in ("AwaitingRetry", "Retrying") for _, count, state in task_runs), task_runs
    assert _snapshot(runs, skip=".moments-cache") == before
    assert _leftovers(tmp_path) == []
