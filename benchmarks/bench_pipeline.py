"""The pipeline end to end on a table larger than the workers' memory, against a plain dask copy
of the same table, on ``LocalCluster`` s of the same shape in one run; and projection write-back against
plain dask.

    .venv/bin/python benchmarks/bench_pipeline.py             # 20M x 50 (10 GB of Parquet), ~20 min
    .venv/bin/python benchmarks/bench_pipeline.py --quick     # 4M x 50, one round, ~3 min
    .venv/bin/python benchmarks/bench_pipeline.py --background-load 2   # the same, 2 busy processes beside it

1. Writes ``scratch/pipeline/source/`` (``bench_out_of_core.write_table``: 4 groups of
   50/30/15/5 %, 500k-row files, a binary target ``y``, each file evicted from the page cache)
   after checking the disk.
2. Every command runs on a new ``LocalCluster(2 workers x 1 thread, memory_limit=--worker-memory)``
   (default 2 GB each: the table does not fit in the workers' memory; the pipeline's Prefect
   tasks run in its own process, the workers run their passes), started before the clock starts.
   With ``--background-load N``, N busy-looping processes run beside everything that is timed
   (a machine under load, reproducibly).
3. ``--repeats`` rounds, each: the source evicted from the page cache before every command, then
   the baseline, plain dask ``read_parquet(source).to_parquet(copy)`` (the floor of any step that
   reads and rewrites the table; ingest is one), then ``fairpca pipeline SOURCE
   --sensitive-feature group --dask-address <cluster>`` in a subprocess, as a scheduled run
   does it: with a ``PREFECT_HOME`` whose database exists (made once, before the rounds, by
   ``prefect server database upgrade``; the temporary API server then starts beside the
   command's imports), without a target (``--exclude y``) and with one (``--target y``: the
   report's downstream check); and without a target as a new user's first run, with a fresh
   ``PREFECT_HOME`` (the temporary server creates its database first); and without a target
   against a Prefect server that runs already (``prefect server start``, started before the
   clock like the cluster, stopped after the run; ``PREFECT_API_URL``), as a deployment's flow
   runs do: what the temporary server costs. Per run: wall time and
   the CLI's own breakdown (``finished in ... s: imports, Prefect API, dask, ingest, fit,
   project, report, Prefect runs``), peak RSS, CPU seconds (also the copy's) and the
   bytes read (``read_chars``: from files or page cache; ``read_bytes``: from disk) and written
   by each role (the workers, the driver, the Prefect API server, this process: the scheduler).
4. Write-back, interleaved ``--writeback-repeats`` times on the pipeline's own ingested table and
   model: ``fairpca_dist.project_table`` against ``dd.read_parquet(features).map_partitions(x →
   ((x − mean) / scale) V).to_parquet`` of the same projected columns, outputs checked equal.

Writes results/pipeline.{md,json} (``--results``, ``--name``); ``ratios`` in the json is the
flat list ``benchmarks/run_all.py`` tabulates (medians over the rounds). The tables are deleted
unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench_out_of_core import evict, write_table  # noqa: E402
from disk import require_free_disk  # noqa: E402
from provenance import provenance  # noqa: E402

RESULTS, SCRATCH = HERE / "results", HERE / "scratch"
MEASURED = [
    "fairpca_dist/io/ingest.py",
    "fairpca_dist/engine/passes.py",
    "fairpca_dist/projection.py",
    "fairpca_dist/fitting.py",
    "fairpca_dist/assessment/report.py",
    "flows/pipeline.py",
]
BREAKDOWN = re.compile(r"finished in ([\d.]+) s: (.*)")


def load() -> float:
    return os.getloadavg()[0]


class Sampler(threading.Thread):
    """Every 50 ms: the RSS of this process (the benchmark and the cluster's scheduler), of the
    CLI process and its children (the Prefect API server), and of the worker processes
    (restarted ones included: the process list is refreshed every 0.5 s), and every process's I/O
    counters and CPU time (from when each process was first seen to when it was last seen)."""

    def __init__(self, cli: int, server: int = -1):
        """``cli``: the pid of the CLI process (-1: none, e.g. while the copy runs); ``server``: the
        pid of a Prefect API server already running (-1: none; the CLI starts its own)."""
        super().__init__(daemon=True)
        self.me, self.cli, self.server = psutil.Process(), cli, server
        self.peak: dict[str, int] = {}
        self.io_first: dict[int, tuple[float, ...]] = {}
        self.io_last: dict[int, tuple[float, ...]] = {}
        self.roles: dict[int, str] = {}
        self.worker_pids: set[int] = set()
        self._stop_event = threading.Event()

    def _role(self, proc: psutil.Process, server: set[int]) -> str:
        if proc.pid == self.me.pid:
            return "scheduler (this process)"
        if proc.pid == self.cli:
            return "driver (the CLI)"
        if proc.pid in server:
            return "Prefect API server"
        # LocalCluster's nannies live in this process; each spawns its worker as our child (so
        # do the busy loops of --background-load, which are not workers)
        command = " ".join(proc.cmdline())
        if BUSY_LOOP in command:
            return BACKGROUND
        worker = proc.ppid() == self.me.pid and "resource_tracker" not in command and "prefect" not in command
        return "worker (largest)" if worker else "other"

    def run(self) -> None:
        tick, procs, server = 0, [], set()
        while not self._stop_event.is_set():
            if tick % 10 == 0:
                with contextlib.suppress(psutil.Error):
                    procs = [self.me, *self.me.children(recursive=True)]
                    server = {
                        p.pid
                        for root in (self.cli, self.server)
                        if root > 0
                        for p in psutil.Process(root).children(recursive=True)
                    } | ({self.server} if self.server > 0 else set())
                    if self.server > 0:
                        procs += [p for p in map(psutil.Process, server) if p not in procs]
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    role = self._role(proc, server)
                    self.peak[role] = max(self.peak.get(role, 0), proc.memory_info().rss)
                    io, cpu = proc.io_counters(), proc.cpu_times()
                    self.io_last[proc.pid] = (io.read_chars, io.read_bytes, io.write_bytes, cpu.user + cpu.system)
                    self.io_first.setdefault(proc.pid, self.io_last[proc.pid])
                    self.roles[proc.pid] = "workers" if role.startswith("worker") else role
                    if role.startswith("worker"):
                        self.worker_pids.add(proc.pid)
            tick += 1
            time.sleep(0.05)

    def stop(self) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Peak RSS (MB) by role, and bytes read and written and CPU seconds (user + system) by
        role (from when each process was first seen to when it was last seen)."""
        self._stop_event.set()
        self.join()
        io: dict[str, dict[str, float]] = {}
        for pid, role in self.roles.items():
            counts = io.setdefault(role, {"read_chars": 0, "read_bytes": 0, "write_bytes": 0, "cpu_seconds": 0.0})
            for i, key in enumerate(counts):
                counts[key] += self.io_last[pid][i] - self.io_first[pid][i]
        return {role: rss / 1e6 for role, rss in self.peak.items()}, io


def timed(function) -> tuple[object, float]:
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def dask_copy(client, source: Path, out: Path) -> dict[str, float]:
    """The copy; the CPU seconds it took by role (the workers, this process: client and scheduler)."""
    import dask.dataframe as dd

    shutil.rmtree(out, ignore_errors=True)
    sampler = Sampler(cli=-1)
    sampler.start()
    dd.read_parquet(str(source)).to_parquet(str(out), write_index=False, compute=True)
    _, io = sampler.stop()
    return {role: counts["cpu_seconds"] for role, counts in io.items()}


def dask_projection(client, table: Path, model, out: Path) -> None:
    """The plain-dask write-back: the model's features, ((x − mean) / scale) V, to Parquet."""
    import dask.dataframe as dd

    features = list(model.feature_names)
    names = [f"fairpca{j}" for j in range(model.components.shape[1])]
    mean, scale, components = model.mean, model.scale, model.components

    def project(part: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(((part.to_numpy(dtype=np.float64) - mean) / scale) @ components, columns=names)

    meta = pd.DataFrame({name: pd.Series(dtype=np.float64) for name in names})
    shutil.rmtree(out, ignore_errors=True)
    frame = dd.read_parquet(str(table), columns=features)
    frame.map_partitions(project, meta=meta).to_parquet(  # part-NNNNN: the files read back in row order
        str(out), write_index=False, compute=True, name_function=lambda i: f"part-{i:05d}.parquet"
    )


def same_projection(ours: Path, theirs: Path, names: list[str]) -> float:
    a = pd.read_parquet(ours, columns=names).to_numpy()
    b = pd.read_parquet(theirs, columns=names).to_numpy()
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def prefect_home(database: bool) -> str:
    """A new ``PREFECT_HOME``; with ``database``, its database made (as after a first run)."""
    home = tempfile.mkdtemp(prefix="prefect-home-")
    if database:
        upgrade = [str(ROOT / ".venv/bin/prefect"), "server", "database", "upgrade", "-y"]
        subprocess.run(upgrade, env={**os.environ, "PREFECT_HOME": home}, check=True, capture_output=True)
    return home


def run_pipeline(
    source: Path,
    runs: Path,
    address: str,
    workers: list[int],
    method: str,
    r: int,
    roles: list[str],
    home: str | None,
    server: RunningServer | None = None,
) -> dict:
    """One ``fairpca pipeline`` run in ``PREFECT_HOME`` ``home`` (None: a fresh one, removed after),
    against ``server`` if given (``PREFECT_API_URL``), else on a temporary server of its own."""
    env = {**os.environ, "PREFECT_HOME": home or prefect_home(database=False)}
    if server is not None:
        env["PREFECT_API_URL"] = server.api_url
    shutil.rmtree(runs, ignore_errors=True)
    command = [
        str(ROOT / ".venv/bin/fairpca"),
        "pipeline",
        str(source),
        "--sensitive-feature",
        "group",
        "--runs-dir",
        str(runs),
        "--run-id",
        "bench",
        "--method",
        method,
        "--n-components",
        str(r),
        "--dask-address",
        address,
        *roles,
    ]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    sampler = Sampler(process.pid, server.process.pid if server is not None else -1)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    peaks, io = sampler.stop()
    if home is None:
        shutil.rmtree(env["PREFECT_HOME"], ignore_errors=True)
    if process.returncode != 0:
        raise SystemExit(f"fairpca pipeline failed ({process.returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}")
    match = BREAKDOWN.search(stdout)
    steps = {}
    for part in match.group(2).split(", ") if match else []:
        name, value, _ = part.rsplit(" ", 2)
        steps[name] = float(value)
    return {
        "seconds": seconds,
        "reported_seconds": float(match.group(1)) if match else None,
        "steps": steps,
        "peak_rss_mb": peaks,
        "io": io,
        "worker_processes": len(sampler.worker_pids),
        "initial_workers": len(workers),
        "stderr_lines": len([line for line in stderr.splitlines() if line.strip()]),
    }


VARIANTS = {
    "no target": (["--exclude", "y"], "warm"),
    "target": (["--target", "y"], "warm"),
    "no target, first run": (["--exclude", "y"], "fresh"),
    "no target, Prefect server running": (["--exclude", "y"], "server"),
}
"""The pipeline's runs of every round: its roles (the report without and with its downstream
check), and its Prefect API: a temporary server of the command's in a ``PREFECT_HOME`` that has
its database (``warm``: as for every run after a machine's first) or not yet (``fresh``: a
first run), or a Prefect server that runs already (``server``: a deployment's, started before
the clock as the Dask cluster is; ``PREFECT_API_URL``)."""


class RunningServer(contextlib.AbstractContextManager):
    """``prefect server start`` on a free port of the loopback, in a ``PREFECT_HOME`` of its own
    whose database exists, answering before the constructor returns; stopped on leaving."""

    def __init__(self) -> None:
        import socket
        import urllib.request

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.home = prefect_home(database=True)
        self.api_url = f"http://127.0.0.1:{port}/api"
        env = {**os.environ, "PREFECT_HOME": self.home, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        command = [str(ROOT / ".venv/bin/prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
        self.process = subprocess.Popen(
            [*command, "--no-ui"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"prefect server start did not answer at {self.api_url}")
            time.sleep(0.2)

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)


BUSY_LOOP = "while True: pass"
BACKGROUND = "background load"  # the role of the busy loops in the tables


class BackgroundLoad:
    """``n`` processes that busy-loop while the benchmark times: a machine under load."""

    def __init__(self, n: int):
        self.processes = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(n)]

    def close(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


@contextlib.contextmanager
def cluster_of(worker_memory: str):
    """``LocalCluster(2 workers x 1 thread, memory_limit=worker_memory)``, a client and the
    workers' process ids."""
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=worker_memory, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield cluster, client, sorted(client.run(os.getpid).values())


def evict_folder(folder: Path) -> None:
    for path in folder.rglob("*.parquet"):
        evict(path)


def median_spread(values: list[float]) -> str:
    return f"{np.median(values):.1f} [{min(values):.1f}–{max(values):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument(
        "--worker-memory",
        default="2GB",
        help="per worker (the workers run the passes over rows; the Prefect tasks run in the CLI's process)",
    )
    parser.add_argument("--method", default="samadi-mw", help="the table has 4 groups")
    parser.add_argument("--r", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="rounds of copy + pipeline runs")
    parser.add_argument("--writeback-repeats", type=int, default=2, help="interleaved write-back runs (0: none)")
    parser.add_argument("--background-load", type=int, default=0, help="busy processes beside the runs")
    parser.add_argument("--quick", action="store_true", help="4M x 50, one round")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--name", default="pipeline")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.repeats, args.writeback_repeats = 4_000_000, 1, 1
    from fairpca_dist import load_model
    from fairpca_dist.projection import project_table

    scratch = SCRATCH / args.name
    source, runs = scratch / "source", scratch / "runs"
    table_bytes = args.rows * (args.cols + 2) * 8
    require_free_disk(scratch, 4.5 * table_bytes, "the source, the ingested table, its projection and a copy")
    shutil.rmtree(scratch, ignore_errors=True)
    out: dict = {
        "command": " ".join(["benchmarks/bench_pipeline.py", *sys.argv[1:]]),
        "provenance": provenance(MEASURED),
        "rows": args.rows,
        "cols": args.cols,
        "worker_memory": args.worker_memory,
        "background_load": args.background_load,
        "load_start": load(),
    }
    print(f"writing {args.rows:,} x {args.cols} ...", flush=True)
    files, out["write_seconds"] = timed(
        lambda: write_table(source, args.rows, args.rows_per_file, 50_000, args.cols, target=True)
    )
    out["source_gb"] = sum(f.stat().st_size for f in files) / 1e9
    warm_home = prefect_home(database=True)
    background = BackgroundLoad(args.background_load)
    rounds: list[dict] = []
    try:
        for round_ in range(args.repeats):
            record: dict = {"load": load()}
            with cluster_of(args.worker_memory) as (cluster, client, workers):
                evict_folder(source)
                record["dask_copy_cpu"], record["dask_copy_seconds"] = timed(
                    lambda: dask_copy(client, source, scratch / "copy")
                )
            shutil.rmtree(scratch / "copy", ignore_errors=True)
            print(f"round {round_ + 1}: plain dask copy {record['dask_copy_seconds']:.1f} s", flush=True)
            for variant, (roles, prefect) in VARIANTS.items():
                # a cluster of its own, as each run of a new user; a running Prefect server only
                # while its run lasts (its services would take CPU from the other runs)
                with (
                    cluster_of(args.worker_memory) as (cluster, client, workers),
                    RunningServer() if prefect == "server" else contextlib.nullcontext() as server,
                ):
                    evict_folder(source)
                    record[variant] = run_pipeline(
                        source,
                        runs,
                        cluster.scheduler_address,
                        workers,
                        args.method,
                        args.r,
                        roles,
                        None if prefect == "fresh" else warm_home,
                        server,
                    )
                print(
                    f"round {round_ + 1}: pipeline ({variant}) {record[variant]['seconds']:.1f} s "
                    f"{record[variant]['steps']}",
                    flush=True,
                )
            record["load_end"] = load()
            rounds.append(record)
        out["rounds"] = rounds
        run_dir = runs / "bench"
        model, table = load_model(run_dir / "model"), run_dir / "table" / "parts"
        names = [f"fairpca{j}" for j in range(model.components.shape[1])]
        times: dict[str, list[float]] = {"ours": [], "dask": []}
        with cluster_of(args.worker_memory) as (cluster, client, workers):
            for _ in range(args.writeback_repeats):
                times["ours"].append(
                    timed(lambda: project_table(model, str(table), scratch / "ours", client=client))[1]
                )
                times["dask"].append(timed(lambda: dask_projection(client, table, model, scratch / "dask"))[1])
        out["writeback"] = {key: sorted(value) for key, value in times.items()}
        if args.writeback_repeats:
            out["writeback_max_relative_difference"] = same_projection(scratch / "ours", scratch / "dask", names)
    finally:
        background.close()
        shutil.rmtree(warm_home, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    out["load_end"] = load()
    copy = [r["dask_copy_seconds"] for r in rounds]
    out["ratios"] = [
        {
            "area": "pipeline",
            "case": f"`fairpca pipeline` end to end ({variant}), {args.rows:,} x {args.cols}"
            + (f", {args.background_load} busy processes beside it" if args.background_load else ""),
            "ours_seconds": float(np.median([r[variant]["seconds"] for r in rounds])),
            "baseline": "plain dask read_parquet → to_parquet of the source",
            "baseline_seconds": float(np.median(copy)),
            "ratio": float(np.median([r[variant]["seconds"] / r["dask_copy_seconds"] for r in rounds])),
        }
        for variant in VARIANTS
    ]
    if args.writeback_repeats:
        ours, dask = np.median(out["writeback"]["ours"]), np.median(out["writeback"]["dask"])
        out["ratios"].append(
            {
                "area": "write-back",
                "case": f"`project_table`, {args.rows:,} rows, r = {args.r}",
                "ours_seconds": float(ours),
                "baseline": "dask read_parquet → map_partitions → to_parquet",
                "baseline_seconds": float(dask),
                "ratio": float(ours / dask),
            }
        )
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{args.name}.json").write_text(json.dumps(out, indent=2, default=float) + "\n")
    (args.results / f"{args.name}.md").write_text(markdown(out, args))
    print((args.results / f"{args.name}.md").read_text())


def markdown(out: dict, args) -> str:
    rounds = out["rounds"]
    copy = [r["dask_copy_seconds"] for r in rounds]
    source_bytes = out["source_gb"] * 1e9
    lines = [
        "# The pipeline end to end, out of core, and projection write-back",
        "",
        f"`{out['command']}` ({out['provenance']}). Load {out['load_start']:.2f} at the start, "
        f"{out['load_end']:.2f} at the end (2 shared cores)"
        + (f", with {out['background_load']} busy processes beside every run" if out["background_load"] else "")
        + f". Source: {out['rows']:,} rows x {out['cols']} float64 features + group + binary y, "
        f"{out['source_gb']:.2f} GB of Parquet, written in {out['write_seconds']:.0f} s; evicted from the page cache "
        f"before every command. `LocalCluster(2 workers x 1 thread, memory_limit={out['worker_memory']})`. "
        f"{len(rounds)} rounds (copy, pipeline without and with a target in a `PREFECT_HOME` whose database "
        "exists, as for every run after a machine's first, then without a target in a fresh one: a first run, "
        "each on a temporary Prefect server the command starts; then without a target against a Prefect server "
        "that runs already, as a deployment's does, started before the clock like the Dask cluster); "
        "median [min–max] s, ratio = median of the rounds' ratios.",
        "",
        "| | s | M rows/s | ratio to the copy | load at the round's start |",
        "|---|---|---|---|---|",
        f"| plain dask `read_parquet(source).to_parquet(copy)` (baseline) | {median_spread(copy)} | "
        f"{out['rows'] / np.median(copy) / 1e6:.2f} | 1 | " + ", ".join(f"{r['load']:.1f}" for r in rounds) + " |",
    ]
    for variant in VARIANTS:
        seconds = [r[variant]["seconds"] for r in rounds]
        ratios = [r[variant]["seconds"] / r["dask_copy_seconds"] for r in rounds]
        lines.append(
            f"| `fairpca pipeline` ({args.method}, r = {args.r}, {variant}) | {median_spread(seconds)} | "
            f"{out['rows'] / np.median(seconds) / 1e6:.2f} | **{np.median(ratios):.2f}** "
            f"[{min(ratios):.2f}–{max(ratios):.2f}] | |"
        )
    lines += ["", "Where the pipeline's time went (its own breakdown, s, each round):", ""]
    for variant in VARIANTS:
        for i, r in enumerate(rounds):
            steps = ", ".join(f"{name} {value:.1f}" for name, value in r[variant]["steps"].items())
            lines.append(f"- {variant}, round {i + 1}: {steps}")
    lines += [
        "",
        "Bytes read (`read_chars`: from files or the page cache; in brackets from disk) and written, by role, "
        "as multiples of the source's size (last round):",
        "",
        "| run | role | read | (from disk) | written | peak RSS MB | CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    last = rounds[-1]
    for role, cpu in sorted(last["dask_copy_cpu"].items()):
        lines.append(f"| the copy | {role} | | | | | {cpu:.1f} |")
    for variant in VARIANTS:
        run = last[variant]
        for role, io in sorted(run["io"].items()):
            peak = max((mb for name, mb in run["peak_rss_mb"].items() if name.startswith(role.rstrip("s"))), default=0)
            lines.append(
                f"| {variant} | {role} | {io['read_chars'] / source_bytes:.2f} x "
                f"| {io['read_bytes'] / source_bytes:.2f} x | {io['write_bytes'] / source_bytes:.2f} x | {peak:.0f} "
                f"| {io['cpu_seconds']:.1f} |"
            )
        lines.append(
            f"| {variant} | | | | | {run['worker_processes']} worker processes seen for {run['initial_workers']} "
            f"workers (more means restarts); lines on stderr: {run['stderr_lines']} | |"
        )
    cores = os.cpu_count() or 1

    def own_cpu(cpu_by_role: dict[str, float]) -> float:
        """CPU seconds of the command's processes, not of the busy loops beside it."""
        return sum(cpu for role, cpu in cpu_by_role.items() if role != BACKGROUND)

    copy_cpu = own_cpu(last["dask_copy_cpu"])
    lines += [
        "",
        f"CPU, last round: the copy used {copy_cpu:.1f} s of CPU in {last['dask_copy_seconds']:.1f} s; "
        + "; ".join(
            f"the pipeline ({variant}) {cpu:.1f} s, "
            f"so on {cores} cores it cannot take less than {cpu / cores / last['dask_copy_seconds']:.2f} copies"
            for variant in VARIANTS
            for cpu in [own_cpu({role: io["cpu_seconds"] for role, io in last[variant]["io"].items()})]
        )
        + "."
        + (
            f" The busy {'process' if out['background_load'] == 1 else 'processes'} beside the runs"
            f" ('{BACKGROUND}') are not counted: they took part of the cores, so the bound is weaker than on a"
            " quiet machine."
            if out["background_load"]
            else ""
        ),
    ]
    if out["writeback"]["ours"]:
        ours, dask = out["writeback"]["ours"], out["writeback"]["dask"]
        lines += [
            "",
            f"**Write-back** of the ingested table with the pipeline's model ({len(ours)} runs each, interleaved, "
            "median [min–max] s):",
            "",
            "| | s | ratio |",
            "|---|---|---|",
            f"| dask `read_parquet(features).map_partitions(project).to_parquet` (baseline) "
            f"| {median_spread(dask)} | 1 |",
            f"| `fairpca_dist.project_table` (validated, staged, atomic swap, `_SUCCESS`) | {median_spread(ours)} | "
            f"{np.median(ours) / np.median(dask):.2f} |",
            "",
            f"Outputs agree to {out['writeback_max_relative_difference']:.1e} (max relative difference).",
        ]
    return "\n".join([*lines, ""])


if __name__ == "__main__":
    main()
