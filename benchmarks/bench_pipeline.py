"""The pipeline end to end on a table larger than the workers' memory, and projection write-back
against plain dask, on one ``LocalCluster`` in one run.

    .venv/bin/python benchmarks/bench_pipeline.py             # 20M x 50 (10 GB of Parquet), ~15-25 min
    .venv/bin/python benchmarks/bench_pipeline.py --quick     # 1M x 20, ~1.5 min

1. Writes ``scratch/pipeline_source/`` (``bench_out_of_core.write_table``: 4 groups of
   50/30/15/5 %, 250k-row files, each evicted from the page cache) after checking the disk.
2. Starts ``LocalCluster(2 workers x 1 thread, memory_limit=--worker-memory)`` (default 2 GB
   each, of which ~0.35 GB are the imports of the Prefect tasks that run in the workers: the
   table does not fit in the workers' memory).
3. Baseline (same cluster): plain dask ``read_parquet(source).to_parquet(copy)``, the floor of
   any step that reads and rewrites the table (ingest is one).
4. Ours: ``fairpca pipeline SOURCE --sensitive-feature group --dask-address <cluster>`` as a new
   user runs it (a subprocess with a fresh ``PREFECT_HOME``): ingest (validate + rewrite),
   fit (one moments pass), project (write-back), report. Wall time and the CLI's own
   breakdown (``finished in ... s: imports, Prefect API, dask, ingest, fit, project, report,
   Prefect runs``), rows/s, peak RSS of the driver (the CLI process), the scheduler (this
   process) and every worker (psutil, every 50 ms), bytes the workers read (``read_chars``:
   from files or page cache; ``read_bytes``: from disk) and wrote.
5. Write-back, interleaved ``--repeats`` times on the pipeline's own ingested table and model:
   ``fairpca_dist.project_table`` against ``dd.read_parquet(features).map_partitions(x →
   ((x − mean) / scale) V).to_parquet`` of the same projected columns, and the outputs checked
   equal (1e-10).

Writes results/pipeline.{md,json} (``--results``, ``--name``); ``ratios`` in the json is the
flat list ``benchmarks/run_all.py`` tabulates. The tables are deleted unless ``--keep``.
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
from bench_out_of_core import write_table  # noqa: E402
from disk import require_free_disk  # noqa: E402
from provenance import provenance  # noqa: E402

RESULTS, SCRATCH = HERE / "results", HERE / "scratch"
MEASURED = [
    "fairpca_dist/io/ingest.py",
    "fairpca_dist/engine/passes.py",
    "fairpca_dist/projection.py",
    "flows/pipeline.py",
]
BREAKDOWN = re.compile(r"finished in ([\d.]+) s: (.*)")


def load() -> float:
    return os.getloadavg()[0]


class Sampler(threading.Thread):
    """Every 50 ms: the RSS of this process (the benchmark and the cluster's scheduler), of the
    CLI process and its children (the Prefect API server), and of the worker processes
    (restarted ones included: the process list is refreshed every 0.5 s), and the workers' I/O
    counters (from when each process was first seen to when it was last seen)."""

    def __init__(self, cli: int):
        super().__init__(daemon=True)
        self.me, self.cli = psutil.Process(), cli
        self.peak: dict[str, int] = {}
        self.io_first: dict[int, tuple[int, int, int]] = {}
        self.io_last: dict[int, tuple[int, int, int]] = {}
        self.worker_pids: set[int] = set()
        self._stop_event = threading.Event()

    def _role(self, proc: psutil.Process, server: set[int]) -> str:
        if proc.pid == self.me.pid:
            return "scheduler (this process)"
        if proc.pid == self.cli:
            return "driver (the CLI)"
        if proc.pid in server:
            return "Prefect API server"
        # LocalCluster's nannies live in this process; each spawns its worker as our child
        worker = proc.ppid() == self.me.pid and "resource_tracker" not in " ".join(proc.cmdline())
        return "worker (largest)" if worker else "other"

    def run(self) -> None:
        tick, procs, server = 0, [], set()
        while not self._stop_event.is_set():
            if tick % 10 == 0:
                with contextlib.suppress(psutil.Error):
                    procs = [self.me, *self.me.children(recursive=True)]
                    server = {p.pid for p in psutil.Process(self.cli).children(recursive=True)}
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    role = self._role(proc, server)
                    self.peak[role] = max(self.peak.get(role, 0), proc.memory_info().rss)
                    if role.startswith("worker"):
                        io = proc.io_counters()
                        self.io_last[proc.pid] = (io.read_chars, io.read_bytes, io.write_bytes)
                        self.io_first.setdefault(proc.pid, self.io_last[proc.pid])
                        self.worker_pids.add(proc.pid)
            tick += 1
            time.sleep(0.05)

    def stop(self) -> tuple[dict[str, float], dict[str, int]]:
        self._stop_event.set()
        self.join()
        io = {
            key: sum(self.io_last[pid][i] - self.io_first[pid][i] for pid in self.io_last)
            for i, key in enumerate(("read_chars", "read_bytes", "write_bytes"))
        }
        return {role: rss / 1e6 for role, rss in self.peak.items()}, io


def timed(function) -> tuple[object, float]:
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def dask_copy(client, source: Path, out: Path) -> None:
    import dask.dataframe as dd

    shutil.rmtree(out, ignore_errors=True)
    dd.read_parquet(str(source)).to_parquet(str(out), write_index=False, compute=True)


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


def run_pipeline(source: Path, runs: Path, address: str, workers: list[int], method: str, r: int) -> dict:
    env = {**os.environ, "PREFECT_HOME": tempfile.mkdtemp(prefix="prefect-home-")}
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
    ]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    sampler = Sampler(process.pid)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    peaks, io = sampler.stop()
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
        "workers_io": io,
        "worker_processes": len(sampler.worker_pids),
        "initial_workers": len(workers),
        "stderr_lines": len([line for line in stderr.splitlines() if line.strip()]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument(
        "--worker-memory",
        default="2GB",
        help="per worker; the pipeline's Prefect tasks run in the workers, ~0.35 GB of imports",
    )
    parser.add_argument("--method", default="samadi-mw", help="the table has 4 groups")
    parser.add_argument("--r", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved write-back runs")
    parser.add_argument("--quick", action="store_true", help="1M x 20, 2 repeats")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--name", default="pipeline")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.cols, args.repeats = 1_000_000, 20, 2
    from dask.distributed import Client, LocalCluster

    from fairpca_dist import load_model
    from fairpca_dist.projection import project_table

    scratch = SCRATCH / "pipeline"
    source, runs = scratch / "source", scratch / "runs"
    table_bytes = args.rows * (args.cols + 1) * 8
    require_free_disk(scratch, 5.5 * table_bytes, "the source, the ingested table, its projection and two copies")
    shutil.rmtree(scratch, ignore_errors=True)
    out: dict = {
        "command": " ".join(["benchmarks/bench_pipeline.py", *sys.argv[1:]]),
        "provenance": provenance(MEASURED),
        "rows": args.rows,
        "cols": args.cols,
        "worker_memory": args.worker_memory,
        "load_start": load(),
    }
    print(f"writing {args.rows:,} x {args.cols} ...", flush=True)
    files, out["write_seconds"] = timed(lambda: write_table(source, args.rows, args.rows_per_file, 50_000, args.cols))
    out["source_gb"] = sum(f.stat().st_size for f in files) / 1e9
    try:
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, memory_limit=args.worker_memory, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            workers = sorted(client.run(os.getpid).values())
            _, out["dask_copy_seconds"] = timed(lambda: dask_copy(client, source, scratch / "copy"))
            print(f"plain dask copy: {out['dask_copy_seconds']:.1f} s", flush=True)
            shutil.rmtree(scratch / "copy", ignore_errors=True)
            out["pipeline"] = run_pipeline(source, runs, cluster.scheduler_address, workers, args.method, args.r)
            print(f"pipeline: {out['pipeline']['seconds']:.1f} s {out['pipeline']['steps']}", flush=True)
            run_dir = runs / "bench"
            model, table = load_model(run_dir / "model"), run_dir / "table" / "parts"
            names = [f"fairpca{j}" for j in range(model.components.shape[1])]
            times: dict[str, list[float]] = {"ours": [], "dask": []}
            for _ in range(args.repeats):
                times["ours"].append(
                    timed(lambda: project_table(model, str(table), scratch / "ours", client=client))[1]
                )
                times["dask"].append(timed(lambda: dask_projection(client, table, model, scratch / "dask"))[1])
            out["writeback"] = {key: sorted(value) for key, value in times.items()}
            out["writeback_max_relative_difference"] = same_projection(scratch / "ours", scratch / "dask", names)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    out["load_end"] = load()
    p = out["pipeline"]
    ours, dask = np.median(out["writeback"]["ours"]), np.median(out["writeback"]["dask"])
    out["ratios"] = [
        {
            "area": "pipeline",
            "case": f"`fairpca pipeline` end to end, {args.rows:,} x {args.cols}",
            "ours_seconds": p["seconds"],
            "baseline": "plain dask read_parquet → to_parquet of the source",
            "baseline_seconds": out["dask_copy_seconds"],
            "ratio": p["seconds"] / out["dask_copy_seconds"],
        },
        {
            "area": "write-back",
            "case": f"`project_table`, {args.rows:,} rows, r = {args.r}",
            "ours_seconds": float(ours),
            "baseline": "dask read_parquet → map_partitions → to_parquet",
            "baseline_seconds": float(dask),
            "ratio": float(ours / dask),
        },
    ]
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{args.name}.json").write_text(json.dumps(out, indent=2, default=float) + "\n")
    (args.results / f"{args.name}.md").write_text(markdown(out, args))
    print((args.results / f"{args.name}.md").read_text())


def markdown(out: dict, args) -> str:
    p = out["pipeline"]
    io = p["workers_io"]
    steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in p["steps"].items())
    ours, dask = out["writeback"]["ours"], out["writeback"]["dask"]
    spread = lambda xs: f"{np.median(xs):.2f} [{min(xs):.2f}–{max(xs):.2f}]"  # noqa: E731
    return "\n".join(
        [
            "# The pipeline end to end, out of core, and projection write-back",
            "",
            f"`{out['command']}` ({out['provenance']}). Load {out['load_start']:.2f} "
            f"at the start, {out['load_end']:.2f} at the "
            f"end (2 shared cores). Source: {out['rows']:,} rows x {out['cols']} float64 features + group, "
            f"{out['source_gb']:.2f} GB of Parquet, "
            f"written in {out['write_seconds']:.0f} s and evicted from the page cache. "
            f"`LocalCluster(2 workers x 1 thread, memory_limit={out['worker_memory']})`.",
            "",
            "| | s | M rows/s | ratio |",
            "|---|---|---|---|",
            f"| plain dask `read_parquet(source).to_parquet(copy)` (baseline) | {out['dask_copy_seconds']:.1f} | "
            f"{out['rows'] / out['dask_copy_seconds'] / 1e6:.2f} | 1 |",
            f"| `fairpca pipeline` ({args.method}, r = {args.r}: ingest, fit, project, report) | {p['seconds']:.1f} | "
            f"{out['rows'] / p['seconds'] / 1e6:.2f} | {p['seconds'] / out['dask_copy_seconds']:.2f} |",
            "",
            f"Where the pipeline's time went (its own breakdown): {steps}.",
            "",
            "Peak RSS (MB): "
            + ", ".join(f"{role} {mb:.0f}" for role, mb in p["peak_rss_mb"].items())
            + f" ({p['worker_processes']} worker processes seen for {p['initial_workers']} workers: "
            "more means restarts). "
            f"Workers read {io['read_chars'] / 1e9:.2f} GB ({io['read_bytes'] / 1e9:.2f} GB from disk) "
            "and wrote "
            f"{io['write_bytes'] / 1e9:.2f} GB = {io['read_chars'] / (out['source_gb'] * 1e9):.1f} x / "
            f"{io['write_bytes'] / (out['source_gb'] * 1e9):.1f} x the source's size. "
            f"Lines on stderr: {p['stderr_lines']}.",
            "",
            f"**Write-back** of the ingested table with the pipeline's model ({args.repeats} runs each, interleaved, "
            "median [min–max] s):",
            "",
            "| | s | ratio |",
            "|---|---|---|",
            f"| dask `read_parquet(features).map_partitions(project).to_parquet` (baseline) | {spread(dask)} | 1 |",
            f"| `fairpca_dist.project_table` (validated, staged, atomic swap, `_SUCCESS`) | {spread(ours)} | "
            f"{np.median(ours) / np.median(dask):.2f} |",
            "",
            f"Outputs agree to {out['writeback_max_relative_difference']:.1e} (max relative difference).",
            "",
        ]
    )


if __name__ == "__main__":
    main()
