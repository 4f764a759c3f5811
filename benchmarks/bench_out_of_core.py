"""Out of core: ``compute_moments`` over a >= 8 GB Parquet table on 2 workers of 1 GB each.

Run (default: 20,000,000 x 50 float64 + int64 group = 8.0 GB of features, 80 files of
~100 MB; several minutes, most of it writing and reading the table)::

    .venv/bin/python benchmarks/bench_out_of_core.py                 # --rows, --rows-per-file, --keep
    .venv/bin/python benchmarks/bench_out_of_core.py --rows 1000000  # smoke test

What it does and measures:

1. Refuses to run unless ``shutil.disk_usage`` shows >= max(20 GB, 2.5 x the table) free.
2. Writes ``scratch/ooc_parquet/part-NNNN.parquet`` one file at a time (the generator never
   holds more than one file); 4 groups of 50/30/15/5 % with group-specific means and scales.
   Each file is fsync'ed and dropped from the page cache (``posix_fadvise(DONTNEED)``).
3. Starts ``LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB")`` (the nanny
   sets OPENBLAS_NUM_THREADS=1 in the workers) and runs
   ``compute_moments(path, sensitive_feature="group", client=client)`` twice: "cold" (files
   evicted from the page cache just before) and "warm" (whatever the first pass left cached).
   Per pass: wall time, rows/s, GB/s (1e9 bytes of float64 features), MB/s of files, and the
   peak RSS of each worker process sampled every 20 ms with psutil in a background thread.
4. Restart check: worker addresses and pids before/after each pass, worker processes that
   vanished while sampled, and scheduler + nanny/worker log lines about memory or restarts.
5. Independent check: the table read back file by file with pyarrow, per-group count, mean and
   centred scatter accumulated in float64 numpy (shifted Gram sums, 2 BLAS threads, timed as
   a single-process baseline); ours must agree to 1e-10 relative.

Writes results/bench_out_of_core.{md,json}; the table is deleted at the end unless --keep.
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
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from threadpoolctl import threadpool_limits

from fairpca_dist import compute_moments

HERE = Path(__file__).resolve().parent
RESULTS, SCRATCH = HERE / "results", HERE / "scratch"
SHARES = (0.50, 0.30, 0.15, 0.05)
LOG_PATTERN = re.compile(r"restart|kill|memory|pause|terminat|died|lost", re.IGNORECASE)


def write_table(folder: Path, rows: int, rows_per_file: int, d: int, seed: int = 0) -> list[Path]:
    """Write the table file by file; each file is generated, written and evicted on its own."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    centres = 3.0 + np.random.default_rng(seed).standard_normal((len(SHARES), d))
    names = [*(f"x{j}" for j in range(d)), "group"]
    files = []
    for k, start in enumerate(range(0, rows, rows_per_file)):
        m = min(rows_per_file, rows - start)
        rng = np.random.default_rng([seed, k])
        groups = rng.choice(len(SHARES), size=m, p=SHARES)
        cols = rng.standard_normal((d, m))  # column-major: each row of `cols` is one column
        cols *= 1.0 + 0.25 * groups
        cols += centres[groups].T
        table = pa.Table.from_arrays([*(pa.array(c) for c in cols), pa.array(groups)], names=names)
        path = folder / f"part-{k:04d}.parquet"
        pq.write_table(table, path)
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
    """Peak RSS of a fixed set of processes, sampled every ``interval`` seconds."""

    def __init__(self, pids: dict[str, int], interval: float = 0.02):
        super().__init__(daemon=True)
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak = dict.fromkeys(pids, 0)
        self.vanished: set[str] = set()
        self.interval, self._stop_event = interval, threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            for name, proc in self.procs.items():
                try:
                    self.peak[name] = max(self.peak[name], proc.memory_info().rss)
                except psutil.NoSuchProcess:
                    self.vanished.add(name)
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
    return dict(groups_equal=same_groups, counts_equal=counts_equal, mean_rel_err=mean_err,
                scatter_rel_err=scatter_err,
                ok=same_groups and counts_equal and max(mean_err, scatter_err) <= 1e-10)


def log_lines(client) -> list[str]:
    """Scheduler, worker and nanny log lines that mention memory, pauses or restarts."""
    found = [f"scheduler: {msg}" for _, msg in client.get_scheduler_logs(n=10_000)]
    for nanny in (False, True):
        for addr, logs in client.get_worker_logs(n=10_000, nanny=nanny).items():
            found += [f"{'nanny' if nanny else 'worker'} {addr}: {msg}" for _, msg in logs]
    return [line for line in found if LOG_PATTERN.search(line)]


def run_pass(client, path: Path, label: str) -> tuple[object, dict]:
    before = client.run(os.getpid)
    sampler = RssSampler(before)
    sampler.start()
    t0 = time.perf_counter()
    moments = compute_moments(str(path), sensitive_feature="group", client=client)
    seconds = time.perf_counter() - t0
    sampler.stop()
    after = client.run(os.getpid)
    info = dict(pass_=label, seconds=seconds, workers_before=before, workers_after=after,
                restarted=before != after or bool(sampler.vanished),
                vanished=sorted(sampler.vanished),
                peak_rss_mb={addr: rss / 1e6 for addr, rss in sampler.peak.items()})
    return moments, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument("--keep", action="store_true", help="keep the Parquet table in scratch/")
    args = parser.parse_args()
    n, d = args.rows, args.cols
    feature_bytes = n * d * 8

    SCRATCH.mkdir(exist_ok=True)
    free = shutil.disk_usage(SCRATCH).free
    need = max(20e9, 2.5 * n * (d + 1) * 8)
    if free < need:
        sys.exit(f"refusing to run: {free / 1e9:.1f} GB free under {SCRATCH}, need at least "
                 f"{need / 1e9:.1f} GB for a {n:,} x {d} table (use a smaller --rows)")

    folder = SCRATCH / "ooc_parquet"
    print(f"writing {n:,} x {d} float64 ({feature_bytes / 1e9:.2f} GB) to {folder} ...", flush=True)
    t0 = time.perf_counter()
    files = write_table(folder, n, args.rows_per_file, d)
    write_seconds = time.perf_counter() - t0
    disk = sum(f.stat().st_size for f in files)
    print(f"  {len(files)} files, {disk / 1e9:.2f} GB on disk, {write_seconds:.1f} s")

    from dask.dataframe import read_parquet
    from distributed import Client, LocalCluster

    partitions = read_parquet(str(folder)).npartitions
    passes = []
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for label in ("cold", "warm"):
            cached_before = psutil.virtual_memory().cached
            if label == "cold":
                for f in files:
                    evict(f)
            cached = psutil.virtual_memory().cached
            print(f"{label} pass (page cache {cached / 1e9:.1f} GB, was {cached_before / 1e9:.1f}) ...",
                  end=" ", flush=True)
            moments, info = run_pass(client, folder, label)
            info.update(rows_s=n / info["seconds"], gb_s=feature_bytes / 1e9 / info["seconds"],
                        file_mb_s=disk / 1e6 / info["seconds"], page_cache_gb_at_start=cached / 1e9)
            passes.append(info)
            print(f"{info['seconds']:.1f} s, {info['gb_s']:.2f} GB/s, peak RSS "
                  f"{', '.join(f'{v:.0f}' for v in info['peak_rss_mb'].values())} MB, "
                  f"restarted: {info['restarted']}", flush=True)
        logs = log_lines(client)
    driver_peak = psutil.Process().memory_info().rss  # scheduler runs in this process too

    print("independent pyarrow + numpy reference, file by file ...", end=" ", flush=True)
    ref, ref_seconds = reference_moments(files, d)
    check = agreement(moments, ref)
    print(f"{ref_seconds:.1f} s; {check}")

    result = dict(rows=n, cols=d, files=len(files), rows_per_file=args.rows_per_file,
                  partitions=partitions, feature_gb=feature_bytes / 1e9, disk_gb=disk / 1e9,
                  write_seconds=write_seconds, passes=passes, memory_log_lines=logs,
                  driver_rss_mb=driver_peak / 1e6, reference_seconds=ref_seconds,
                  reference_gb_s=feature_bytes / 1e9 / ref_seconds, agreement=check,
                  groups={str(g): int(c) for g, c in zip(moments.groups, moments.count)})
    write_results(result)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


def write_results(r: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_out_of_core.json").write_text(json.dumps(r, indent=2, default=str) + "\n")
    a = r["agreement"]
    lines = [
        "# bench_out_of_core: compute_moments on a Parquet table larger than the cluster memory",
        "",
        f"`.venv/bin/python benchmarks/bench_out_of_core.py --rows {r['rows']}` — {r['rows']:,} x "
        f"{r['cols']} float64 + int64 group ({r['feature_gb']:.2f} GB of features, {r['disk_gb']:.2f} GB "
        f"on disk in {r['files']} files of {r['rows_per_file']:,} rows, {r['partitions']} dask "
        f"partitions; written in {r['write_seconds']:.0f} s). LocalCluster(n_workers=2, "
        "threads_per_worker=1, memory_limit='1GB'), i.e. 2 GB of worker memory for the whole table.",
        "",
        "| pass | wall s | M rows/s | GB/s | file MB/s | peak RSS per worker (MB) | worker restarted |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in r["passes"]:
        rss = " / ".join(f"{v:.0f}" for v in p["peak_rss_mb"].values())
        lines.append(f"| {p['pass_']} (page cache {p['page_cache_gb_at_start']:.1f} GB at start) | "
                     f"{p['seconds']:.1f} | {p['rows_s'] / 1e6:.2f} | {p['gb_s']:.2f} | "
                     f"{p['file_mb_s']:.0f} | {rss} | {'YES' if p['restarted'] else 'no'} |")
    lines += [
        f"| reference: pyarrow + numpy, 1 process, 2 BLAS threads, file by file (after the warm pass) | "
        f"{r['reference_seconds']:.1f} | {r['rows'] / r['reference_seconds'] / 1e6:.2f} | "
        f"{r['reference_gb_s']:.2f} | {r['disk_gb'] * 1e3 / r['reference_seconds']:.0f} | – | – |",
        "",
        f"Agreement with the reference: groups {'equal' if a['groups_equal'] else 'DIFFER'}, counts "
        f"{'equal' if a['counts_equal'] else 'DIFFER'}, max relative error of means "
        f"{a['mean_rel_err']:.1e}, of scatter matrices {a['scatter_rel_err']:.1e} "
        f"(required <= 1e-10: {'PASS' if a['ok'] else 'FAIL'}).",
        "",
        f"Log lines about memory/pause/restart (scheduler, workers, nannies): {len(r['memory_log_lines'])}"
        + ("" if not r["memory_log_lines"] else "; first ones:"),
    ]
    lines += [f"    {line[:300]}" for line in r["memory_log_lines"][:10]]
    lines += ["", f"Driver process (client + scheduler) RSS at the end: {r['driver_rss_mb']:.0f} MB."]
    (RESULTS / "bench_out_of_core.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
