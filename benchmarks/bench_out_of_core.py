"""Out of core: ``compute_moments`` over a >= 8 GB Parquet table on 2 workers of 1 GB each.

Run (default: 20,000,000 x 50 float64 + int64 group = 8.0 GB of features, 10 GB of Parquet
in 80 files of ~125 MB; 5-20 minutes: ~2 min to write, the passes, ~30 s of reference)::

    .venv/bin/python benchmarks/bench_out_of_core.py                 # the >= 8 GB run
    .venv/bin/python benchmarks/bench_out_of_core.py --rows 1000000  # smoke test

Options: --rows-per-file (250,000: ~125 MB files), --row-group-rows (50,000), --read-options
JSON passed to ``compute_moments(read_options=...)`` (e.g. '{"split_row_groups": true}' for
one dask partition per row group), --name (results/<name>.{md,json}), --keep (keep the table
in scratch/), --reuse (use a table kept by an earlier run with the same --rows), --timeout
(900 s: a pass with no result by then is reported as hung and the run stops).

What it does and measures:

1. Refuses to run unless ``shutil.disk_usage`` shows >= max(20 GB, 2.5 x the table) free.
2. Writes ``scratch/ooc_parquet/part-NNNN.parquet`` one file at a time (the generator never
   holds more than one file); 4 groups of 50/30/15/5 % with group-specific means and scales.
   Each file is fsync'ed and dropped from the page cache (``posix_fadvise(DONTNEED)``).
3. Starts ``LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB")`` (the nanny
   sets OPENBLAS_NUM_THREADS=1 in the workers) and runs
   ``compute_moments(path, sensitive_feature="group", client=client)`` twice: "cold" (files
   evicted from the page cache just before) and "warm" (whatever the first pass left cached;
   the cluster is restarted first if the cold pass failed, and a hung pass ends the run).
   Per pass: wall time, rows/s, GB/s (1e9 bytes of float64 features), MB/s of files, and the
   peak RSS of each worker process sampled every 20 ms with psutil in a background thread.
4. Restart check: worker addresses and pids before/after each pass, worker pids that died or
   appeared while sampled, and scheduler + nanny/worker log lines about memory or restarts.
5. Independent check: the table read back file by file with pyarrow, per-group count, mean and
   centred scatter accumulated in float64 numpy (shifted Gram sums, 2 BLAS threads, timed as
   a single-process baseline); ours must agree to 1e-10 relative.

Writes results/bench_out_of_core.{md,json} (see --name); the table is deleted at the end
unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from disk import require_free_disk  # noqa: E402
from provenance import commit  # noqa: E402

from fairpca_dist import compute_moments  # noqa: E402
from fairpca_dist.engine.sources import open_table  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS, SCRATCH = HERE / "results", HERE / "scratch"
SHARES = (0.50, 0.30, 0.15, 0.05)
LOG_PATTERN = re.compile(r"paus|resum|restart|kill|terminat|exceed|unmanaged|memory usage|died|lost", re.I)


def write_table(
    folder: Path, rows: int, rows_per_file: int, row_group: int, d: int, seed: int = 0, *, target: bool = False
) -> list[Path]:
    """Write the table file by file; each file is generated, written and evicted on its own.
    With ``target``, a binary column ``y`` follows (1 where x0 is above its group's centre)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    centres = 3.0 + np.random.default_rng(seed).standard_normal((len(SHARES), d))
    names = [*(f"x{j}" for j in range(d)), "group", *(["y"] if target else [])]
    files = []
    for k, start in enumerate(range(0, rows, rows_per_file)):
        m = min(rows_per_file, rows - start)
        rng = np.random.default_rng([seed, k])
        groups = rng.choice(len(SHARES), size=m, p=SHARES)
        cols = rng.standard_normal((d, m))  # column-major: each row of `cols` is one column
        cols *= 1.0 + 0.25 * groups
        cols += centres[groups].T
        labels = [pa.array((cols[0] > centres[groups, 0]).astype(np.int8))] if target else []
        table = pa.Table.from_arrays([*(pa.array(c) for c in cols), pa.array(groups), *labels], names=names)
        path = folder / f"part-{k:04d}.parquet"
        pq.write_table(table, path, row_group_size=row_group)
        evict(path)
        files.append(path)
        print(f"\r  wrote {k + 1} files, {start + m:,} rows", end="", flush=True)
    print()
    return files


def evict(path: Path) -> None:
    """fsync the file and ask the kernel to drop it from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class RssSampler(threading.Thread):
    """Peak RSS of every worker process (children of this process), sampled every 20 ms.

    The child list is refreshed every 0.5 s, so a worker that the nanny restarts is sampled
    too; ``dead`` collects the pids that disappeared while the pass ran.
    """

    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True)
        self.peak: dict[int, int] = {}
        self.dead: set[int] = set()
        self.interval, self._stop_event = interval, threading.Event()

    @staticmethod
    def workers() -> list[psutil.Process]:
        found = []
        for proc in psutil.Process().children(recursive=True):
            try:
                if "resource_tracker" not in " ".join(proc.cmdline()):
                    found.append(proc)
            except psutil.Error:  # exited (or a zombie) since children() listed it
                pass
        return found

    def run(self) -> None:
        procs, tick = self.workers(), 0
        while not self._stop_event.is_set():
            if tick % 25 == 0:
                procs = self.workers()
            for proc in procs:
                try:
                    self.peak[proc.pid] = max(self.peak.get(proc.pid, 0), proc.memory_info().rss)
                except psutil.Error:  # gone or a zombie: the worker died
                    self.dead.add(proc.pid)
            tick += 1
            time.sleep(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def reference_moments(files: list[Path], d: int) -> tuple[dict, float]:
    """Per-group (count, mean, scatter) from pyarrow + numpy, file by file, float64."""
    features = [f"x{j}" for j in range(d)]
    acc: dict[int, list] = {}
    shift = None
    t0 = time.perf_counter()
    with threadpool_limits(limits=2, user_api="blas"):
        for path in files:
            table = pq.read_table(path, columns=[*features, "group"])
            x = np.column_stack([table.column(c).to_numpy() for c in features]).astype(np.float64)
            groups = table.column("group").to_numpy()
            if shift is None:
                shift = x.mean(axis=0)  # pilot shift: keeps the raw Gram sums well conditioned
            x -= shift
            for g in np.unique(groups):
                xg = x[groups == g]
                n, s, gram = acc.setdefault(int(g), [0, np.zeros(d), np.zeros((d, d))])
                acc[int(g)] = [n + len(xg), s + xg.sum(axis=0), gram + xg.T @ xg]
    seconds = time.perf_counter() - t0
    out = {g: (n, shift + s / n, gram - np.outer(s, s) / n) for g, (n, s, gram) in acc.items()}
    return out, seconds


def agreement(moments, ref: dict) -> dict:
    counts_equal = all(int(moments.count[i]) == ref[g][0] for i, g in enumerate(moments.groups))
    rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))  # noqa: E731
    mean_err = max(rel(moments.mean[i], ref[g][1]) for i, g in enumerate(moments.groups))
    scatter_err = max(rel(moments.scatter[i], ref[g][2]) for i, g in enumerate(moments.groups))
    same_groups = sorted(moments.groups) == sorted(ref)
    return dict(
        groups_equal=same_groups,
        counts_equal=counts_equal,
        mean_rel_err=mean_err,
        scatter_rel_err=scatter_err,
        ok=same_groups and counts_equal and max(mean_err, scatter_err) <= 1e-10,
    )


def log_lines(client) -> list[str]:
    """Scheduler, worker and nanny log lines that mention memory, pauses or restarts."""
    found = [f"scheduler: {msg}" for _, msg in client.get_scheduler_logs(n=10_000)]
    for nanny in (False, True):
        for addr, logs in client.get_worker_logs(n=10_000, nanny=nanny).items():
            found += [f"{'nanny' if nanny else 'worker'} {addr}: {msg}" for _, msg in logs]
    return [line for line in found if LOG_PATTERN.search(line)]


def run_with_timeout(run: Callable[[], Any], timeout: float) -> tuple[Any, str | None, float]:
    """``run()`` in a daemon thread for at most ``timeout`` seconds: its result (None if it
    failed or did not finish), the error line (``Type: message``, or ``Hung: no result after
    N s``) and the seconds waited. A failed pass is a result too (e.g. ``KilledWorker``)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = run()
        except Exception as exc:
            box["error"] = f"{type(exc).__name__}: {exc}"

    started = time.perf_counter()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    seconds = time.perf_counter() - started
    if thread.is_alive():
        box["error"] = f"Hung: no result after {timeout:.0f} s"
    return box.get("result"), box.get("error"), seconds


def run_pass(client, path: Path, label: str, read_options: dict | None, timeout: float) -> tuple[object, dict]:
    before = client.run(os.getpid)
    idle_rss = client.run(lambda: psutil.Process().memory_info().rss)
    sampler = RssSampler()
    sampler.start()
    moments, error, seconds = run_with_timeout(
        lambda: compute_moments(str(path), sensitive_feature="group", client=client, read_options=read_options),
        timeout,
    )
    sampler.stop()
    after = client.run(os.getpid)
    info = dict(
        pass_=label,
        seconds=seconds,
        error=error,
        workers_before=before,
        workers_after=after,
        restarted=before != after or bool(sampler.dead) or len(sampler.peak) > len(before),
        worker_pids_seen=len(sampler.peak),
        worker_pids_died=sorted(sampler.dead),
        idle_rss_mb=sorted(rss / 1e6 for rss in idle_rss.values()),
        peak_rss_mb={pid: rss / 1e6 for pid, rss in sampler.peak.items()},
    )
    return moments, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument("--row-group-rows", type=int, default=50_000, help="rows per Parquet row group")
    parser.add_argument(
        "--read-options",
        type=json.loads,
        default=None,
        help="JSON passed as compute_moments(read_options=...), e.g. '{\"split_row_groups\": true}'",
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a pass counts as hung")
    parser.add_argument("--name", default="bench_out_of_core", help="<results>/<name>.{md,json}")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="keep the Parquet table in scratch/")
    parser.add_argument("--reuse", action="store_true", help="reuse a kept table of the same size")
    args = parser.parse_args()
    n, d = args.rows, args.cols
    feature_bytes = n * d * 8

    measured = commit()  # the code this run imported
    require_free_disk(SCRATCH, max(20e9, 2.5 * n * (d + 1) * 8), f"a {n:,} x {d} table")

    load_start = os.getloadavg()[0]
    folder = SCRATCH / "ooc_parquet"
    print(f"writing {n:,} x {d} float64 ({feature_bytes / 1e9:.2f} GB) to {folder} ...", flush=True)
    t0 = time.perf_counter()
    files = sorted(folder.glob("part-*.parquet")) if args.reuse and folder.exists() else []
    if not files or sum(pq.ParquetFile(f).metadata.num_rows for f in files) != n:
        files = write_table(folder, n, args.rows_per_file, args.row_group_rows, d)
    write_seconds = time.perf_counter() - t0
    disk = sum(f.stat().st_size for f in files)
    print(f"  {len(files)} files, {disk / 1e9:.2f} GB on disk, {write_seconds:.1f} s")

    from distributed import Client, LocalCluster

    partitions = open_table(str(folder), sensitive_feature="group", read_options=args.read_options).n_partitions
    passes, results = [], []
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB", dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        for label in ("cold", "warm"):
            if passes and passes[-1]["error"]:
                client.restart()  # forget the erred tasks: the next pass has the same keys
            if label == "cold":
                for f in files:
                    evict(f)
            cached = psutil.virtual_memory().cached
            print(f"{label} pass (page cache {cached / 1e9:.1f} GB) ...", end=" ", flush=True)
            moments, info = run_pass(client, folder, label, args.read_options, args.timeout)
            info.update(
                rows_s=n / info["seconds"],
                gb_s=feature_bytes / 1e9 / info["seconds"],
                file_mb_s=disk / 1e6 / info["seconds"],
                page_cache_gb_at_start=cached / 1e9,
            )
            passes.append(info)
            results.append(moments)
            print(
                f"{info['seconds']:.1f} s, {info['gb_s']:.3f} GB/s, peak RSS "
                f"{', '.join(f'{v:.0f}' for v in info['peak_rss_mb'].values())} MB, "
                f"restarted: {info['restarted']}, error: {info['error']}",
                flush=True,
            )
            if (info["error"] or "").startswith("Hung"):
                break  # the cluster is stuck (e.g. a worker paused for good): stop here
        logs = log_lines(client)
    driver_rss = psutil.Process().memory_info().rss  # the scheduler runs in this process too

    print("independent pyarrow + numpy reference, file by file ...", end=" ", flush=True)
    ref, ref_seconds = reference_moments(files, d)
    for info, moments in zip(passes, results, strict=True):
        info["agreement"] = agreement(moments, ref) if moments is not None else None
    print(f"{ref_seconds:.1f} s; {[p['agreement'] for p in passes]}")

    result = dict(
        command=" ".join(["benchmarks/bench_out_of_core.py", *sys.argv[1:]]),
        commit=measured,
        rows=n,
        cols=d,
        files=len(files),
        rows_per_file=args.rows_per_file,
        row_group_rows=args.row_group_rows,
        read_options=args.read_options,
        partitions=partitions,
        feature_gb=feature_bytes / 1e9,
        disk_gb=disk / 1e9,
        write_seconds=write_seconds,
        passes=passes,
        pause_events=sum("Pausing worker" in line for line in logs),
        restart_events=sum(bool(re.search(r"restart|kill|terminat", line, re.I)) for line in logs),
        memory_log_lines=logs,
        driver_rss_mb=driver_rss / 1e6,
        reference_seconds=ref_seconds,
        reference_gb_s=feature_bytes / 1e9 / ref_seconds,
        load_average_start=load_start,
        load_average_end=os.getloadavg()[0],
    )
    result["ratios"] = [
        {
            "area": "moments pass",
            "case": f"`compute_moments` out of core ({info['pass_']} page cache), "
            f"{n:,} x {d} Parquet, 2 workers of 1 GB",
            "ours_seconds": info["seconds"],
            "baseline": "pyarrow + numpy file by file, one process, 2 BLAS threads (in-memory per file)",
            "baseline_seconds": ref_seconds,
            "ratio": info["seconds"] / ref_seconds,
        }
        for info in passes
        if not info["error"]
    ]
    write_results(result, args.results, args.name)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


def write_results(r: dict, results: Path, name: str) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(r, indent=2, default=str) + "\n")
    lines = [
        "# bench_out_of_core: compute_moments on a Parquet table larger than the cluster memory",
        "",
        f"`.venv/bin/python {r['command']}` at {r['commit']}: {r['rows']:,} x {r['cols']} float64 + "
        f"int64 group ({r['feature_gb']:.2f} GB of features, {r['disk_gb']:.2f} GB on disk in "
        f"{r['files']} files of {r['rows_per_file']:,} rows, row groups of {r['row_group_rows']:,}; "
        f"{r['partitions']} dask partitions with read_options={r['read_options']}; written in "
        f"{r['write_seconds']:.0f} s). LocalCluster(n_workers=2, threads_per_worker=1, "
        "memory_limit='1GB'): 2 GB of worker memory for the whole table. "
        f"Load average at the start {r.get('load_average_start', float('nan')):.2f}, at the end "
        f"{r['load_average_end']:.2f} (1 min; other processes share the 2 cores).",
        "",
        "| pass | wall s | M rows/s | GB/s | file MB/s | worker RSS idle -> peak per worker pid (MB) | restarted | "
        "agrees with reference (max rel. err of means / scatter) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in r["passes"]:
        rss = (
            " / ".join(f"{v:.0f}" for v in p["idle_rss_mb"])
            + " -> "
            + " / ".join(f"{v:.0f}" for v in p["peak_rss_mb"].values())
        )
        a = p["agreement"]
        restarted = (
            f"YES ({p['worker_pids_seen']} worker pids, {len(p['worker_pids_died'])} died)" if p["restarted"] else "no"
        )
        agree = (
            f"FAILED: {p['error'][:160]}"
            if a is None
            else f"{'PASS' if a['ok'] else 'FAIL'} ({a['mean_rel_err']:.1e} / {a['scatter_rel_err']:.1e}, "
            f"counts {'equal' if a['counts_equal'] else 'DIFFER'})"
        )
        lines.append(
            f"| {p['pass_']} (page cache {p['page_cache_gb_at_start']:.1f} GB at start) | "
            f"{p['seconds']:.1f} | {p['rows_s'] / 1e6:.3f} | {p['gb_s']:.3f} | "
            f"{p['file_mb_s']:.0f} | {rss} | {restarted} | {agree} |"
        )
    lines += [
        f"| reference: pyarrow + numpy in this process, 2 BLAS threads, file by file | "
        f"{r['reference_seconds']:.1f} | {r['rows'] / r['reference_seconds'] / 1e6:.3f} | "
        f"{r['reference_gb_s']:.3f} | {r['disk_gb'] * 1e3 / r['reference_seconds']:.0f} | – | – | – |",
        "",
        f"Scheduler/worker/nanny log lines about memory, pauses or restarts: {len(r['memory_log_lines'])} "
        f"({r['pause_events']} 'Pausing worker', {r['restart_events']} mentioning restart/kill/terminate)"
        + (":" if r["memory_log_lines"] else "."),
    ]
    lines += [f"    {line[:240]}" for line in r["memory_log_lines"][:8]]
    lines += [
        "",
        f"Driver process (client + scheduler) RSS at the end: {r['driver_rss_mb']:.0f} MB. "
        "Required agreement: 1e-10 relative, counts equal.",
    ]
    (results / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
