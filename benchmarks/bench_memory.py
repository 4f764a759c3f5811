"""Worker memory: the floor of a Dask worker and the memory per partition, by row-group size and p.

    .venv/bin/python benchmarks/bench_memory.py           # ~6 min: the grid below
    .venv/bin/python benchmarks/bench_memory.py --quick   # ~2 min: p = 50 only

What it measures (every worker a real ``distributed`` worker process, peaks read from the
kernel: ``/proc/<pid>/clear_refs`` resets a process's high-water mark, ``VmHWM`` in
``/proc/<pid>/status`` is its peak resident memory since):

1. **Floor.** A fresh ``LocalCluster(1 worker)``: the worker's resident memory bare, then after
   importing numpy, pandas, pyarrow.parquet, dask.dataframe and ``fairpca_dist.engine.passes`` (what
   every pass's tasks import), one after the other. This script imports no library at its top,
   so the spawned worker starts bare.
2. **Memory per partition.** For each (p, rows per row group) of the grid, a Parquet file of
   1.5 row groups (p float64 features + an int64 group, pyarrow ``row_group_size``); on a fresh
   ``LocalCluster(1 worker x 1 thread, no memory limit)``: the worker's peak above its floor
   during a moments pass, an ingest and a write-back (``project_table``) of the file, each read
   as the library reads it by default (row groups packed into partitions of <= 64 MiB, larger
   ones read in slices), and for the largest row groups also as one partition per row group
   (``read_options={"split_row_groups": True}``: what dask does without slicing). Beside each:
   the decoded bytes of the largest partition and ``fairpca_dist.engine.memory``'s estimate of what
   one task needs for it (``PartitionSize.need``); the estimate must not be below a measured peak.
3. **The acceptance case and the cost of slicing.** 1.1M x 50 in one file of 1,048,576-row groups
   (pandas' default) against the same rows in 65,536-row groups, moments pass on
   ``LocalCluster(2 workers x 1 thread, 1 GB)``, ``--repeats`` rounds alternating the order:
   wall time (ratio: slicing decodes a row group ≈ (s + 1) / 2 times for s slices), each
   worker's peak, whether a worker paused or restarted, and agreement of the two results.
4. **The check.** The smallest memory limit ``fairpca_dist.engine.memory.check_workers`` accepts for
   that file on 2 workers x 1 thread, and a moments pass at that limit (it must finish with no
   worker paused or restarted), and at 100 MB less (it must be refused before any task runs).

Writes results/bench_memory.{md,json} (``--results``); ``ratios`` in the json feeds
``benchmarks/run_all.py``. Tables are written to scratch/ and deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from provenance import provenance  # noqa: E402 - light: the workers this script spawns import it too

RESULTS, SCRATCH = HERE / "results", HERE / "scratch" / "bench_memory"
MEASURED = ["fairpca_dist/engine/memory.py", "fairpca_dist/engine/parquet_slices.py", "fairpca_dist/engine/sources.py"]
FLOOR_STEPS = (
    ("distributed worker, bare", ()),
    ("+ numpy", ("numpy",)),
    ("+ pandas", ("pandas",)),
    ("+ pyarrow.parquet", ("pyarrow.parquet",)),
    ("+ dask.dataframe", ("dask.dataframe",)),
    ("+ fairpca_dist.engine.passes (what a pass's tasks import)", ("fairpca_dist.engine.passes",)),
)
GRID = ((10, 131_072), (10, 1_048_576), (50, 16_384), (50, 131_072), (50, 1_048_576), (200, 16_384), (200, 131_072))
QUICK_GRID = ((50, 131_072), (50, 1_048_576))
ACCEPTANCE_ROWS, ACCEPTANCE_P, SMALL_GROUPS = 1_100_000, 50, 65_536


# ---------------------------------------------------------------- run inside the workers
def rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def imported(modules: tuple[str, ...]) -> int:
    import importlib

    for module in modules:
        importlib.import_module(module)
    return rss()


def reset_peak() -> int:
    """Reset this process's high-water mark of resident memory to its current size."""
    Path("/proc/self/clear_refs").write_text("5")
    return rss()


def peak() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


# ---------------------------------------------------------------- the driver
def cluster(n_workers: int, memory_limit: str | int):
    from distributed import Client, LocalCluster

    local = LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, memory_limit=memory_limit, dashboard_address=None
    )
    return local, Client(local)


def write_table(path: Path, rows: int, p: int, row_group_rows: int, seed: int = 0) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 3, rows)
    columns = [pa.array(rng.standard_normal(rows) * (1.0 + 0.5 * groups) + groups) for _ in range(p)]
    table = pa.Table.from_arrays([*columns, pa.array(groups)], names=[*(f"x{j}" for j in range(p)), "group"])
    pq.write_table(table, path, row_group_size=row_group_rows)


def measure_floor() -> list[dict]:
    local, client = cluster(1, 0)
    with local, client:
        steps = [{"step": "distributed worker, bare", "rss": next(iter(client.run(rss).values()))}]
        for name, modules in FLOOR_STEPS[1:]:
            steps.append({"step": name, "rss": next(iter(client.run(imported, modules).values()))})
    return steps


def partition_size(path: Path, read_options: dict | None):
    from fairpca_dist.engine.memory import frame_partition_size
    from fairpca_dist.engine.sources import open_table

    table = open_table(str(path), sensitive_feature="group", read_options=read_options)
    return table.n_partitions, frame_partition_size(table.frame[table.columns])


def worker_peak(client, run) -> tuple[int, float, object]:
    """Peak resident memory above the floor while ``run()`` runs, the seconds it took, its result."""
    floor = next(iter(client.run(reset_peak).values()))
    started = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - started
    return next(iter(client.run(peak).values())) - floor, seconds, result


def measure_partitions(grid, scratch: Path) -> list[dict]:
    from fairpca_dist import compute_moments, fit_projection
    from fairpca_dist.io.ingest import ingest_table
    from fairpca_dist.projection import project_table

    rows_out = []
    for p, group_rows in grid:
        path = scratch / f"p{p}_rg{group_rows}.parquet"
        write_table(path, group_rows + group_rows // 2, p, group_rows)
        modes = [("default (packed <= 64 MiB, large row groups in slices)", None)]
        if group_rows * (p + 1) * 8 > 64 * 2**20:
            modes.append(("one partition per row group (no slicing)", {"split_row_groups": True}))
        for mode, read_options in modes:
            n_partitions, size = partition_size(path, read_options)
            local, client = cluster(1, 0)
            with local, client:
                floor = next(iter(client.run(imported, ("fairpca_dist.engine.passes",)).values()))
                passes = {}
                moments_peak, seconds, moments = worker_peak(
                    client,
                    lambda path=path, client=client, read_options=read_options: compute_moments(
                        str(path), sensitive_feature="group", client=client, read_options=read_options
                    ),
                )
                passes["moments"] = (moments_peak, seconds)
                if read_options is None:
                    model = fit_projection(moments, 2, method="pca")
                    out = scratch / "out"
                    passes["ingest"] = worker_peak(
                        client,
                        lambda path=path, out=out, client=client: ingest_table(
                            str(path), out / "ingested", sensitive_feature="group", client=client
                        ),
                    )[:2]
                    passes["write-back"] = worker_peak(
                        client,
                        lambda model=model, path=path, out=out, client=client: project_table(
                            model, str(path), out / "projected", client=client
                        ),
                    )[:2]
                    shutil.rmtree(out, ignore_errors=True)
            for name, (measured, seconds) in passes.items():
                rows_out.append(
                    {
                        "p": p,
                        "row_group_rows": group_rows,
                        "reading": mode,
                        "pass": name,
                        "partitions": n_partitions,
                        "partition_rows": size.rows,
                        "decoded_bytes": size.decoded_bytes,
                        "estimate": size.need(),
                        "peak_above_floor": measured,
                        "floor": floor,
                        "seconds": seconds,
                    }
                )
                print(
                    f"p={p} row groups of {group_rows:,} ({mode}), {name}: partition "
                    f"{size.decoded_bytes / 2**20:.0f} MiB decoded, peak {measured / 2**20:.0f} MiB above the floor, "
                    f"estimate {size.need() / 2**20:.0f} MiB",
                    flush=True,
                )
        path.unlink()
    return rows_out


def paused_or_restarted(client) -> list[str]:
    lines = [message for _, message in client.get_scheduler_logs(n=1000)]
    for nanny in (False, True):
        lines += [message for logs in client.get_worker_logs(n=1000, nanny=nanny).values() for _, message in logs]
    return [line for line in lines if any(word in line for word in ("Pausing worker", "memory budget", "Restarting"))]


def measure_acceptance(scratch: Path, repeats: int) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    from fairpca_dist import compute_moments

    big, small = scratch / "groups_1048576.parquet", scratch / "groups_65536.parquet"
    write_table(big, ACCEPTANCE_ROWS, ACCEPTANCE_P, 1_048_576)
    pq.write_table(pq.read_table(big), small, row_group_size=SMALL_GROUPS)
    times: dict[str, list[float]] = {"sliced": [], "small": []}
    peaks: dict[str, list[int]] = {"sliced": [], "small": []}
    results = {}
    local, client = cluster(2, "1GB")
    with local, client:
        client.run(imported, ("fairpca_dist.engine.passes",))
        for round_ in range(repeats):
            for name, path in (("sliced", big), ("small", small))[:: 1 if round_ % 2 == 0 else -1]:
                client.run(reset_peak)
                started = time.perf_counter()
                results[name] = compute_moments(str(path), sensitive_feature="group", client=client)
                times[name].append(time.perf_counter() - started)
                peaks[name].append(max(client.run(peak).values()))
        events = paused_or_restarted(client)
    a, b = results["sliced"], results["small"]
    agreement = float(
        max(
            np.abs(a.scatter - b.scatter).max() / np.abs(b.scatter).max(),
            np.abs(a.mean - b.mean).max() / np.abs(b.mean).max(),
        )
    )
    return {
        "rows": ACCEPTANCE_ROWS,
        "p": ACCEPTANCE_P,
        "times": times,
        "peaks": peaks,
        "events": events,
        "counts_equal": bool((a.count == b.count).all()),
        "max_rel_diff": agreement,
        "partitions": {"sliced": partition_size(big, None)[0], "small": partition_size(small, None)[0]},
    }


def measure_check(scratch: Path) -> dict:
    from fairpca_dist import compute_moments
    from fairpca_dist.engine.memory import worker_memory
    from fairpca_dist.exceptions import ResourceError

    path = scratch / "groups_1048576.parquet"
    _, size = partition_size(path, None)
    local, client = cluster(2, "1GB")
    with local, client:
        required = math.ceil(max(w.required_limit(size.need()) for w in worker_memory(client)) / 1e8) * 10**8
    outcomes = {}
    for limit in (required, required - 10**8):
        local, client = cluster(2, limit)
        with local, client:
            started = time.perf_counter()
            try:
                compute_moments(str(path), sensitive_feature="group", client=client)
                outcome = "finished"
            except ResourceError as error:
                outcome = f"refused: {error}"
            outcomes[limit] = {
                "outcome": outcome,
                "seconds": time.perf_counter() - started,
                "peak": max(client.run(peak).values()),
                "events": paused_or_restarted(client),
            }
    return {"required": required, "need": size.need(), "outcomes": outcomes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="p = 50 only, one round (~2 min)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds of the acceptance case (default 3, quick 1)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    measured = provenance(MEASURED)  # the code this run imports
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)
    load = os.getloadavg()[0]
    try:
        floor = measure_floor()
        print("floor:", ", ".join(f"{s['step']} {s['rss'] / 2**20:.0f} MiB" for s in floor), flush=True)
        partitions = measure_partitions(QUICK_GRID if args.quick else GRID, SCRATCH)
        acceptance = measure_acceptance(SCRATCH, repeats)
        print("acceptance:", acceptance["times"], flush=True)
        check = measure_check(SCRATCH)
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    result = {
        "command": " ".join(["benchmarks/bench_memory.py", *sys.argv[1:]]),
        "provenance": measured,
        "load_average": [load, os.getloadavg()[0]],
        "floor": floor,
        "partitions": partitions,
        "acceptance": acceptance,
        "check": check,
    }
    sliced, small = (sorted(acceptance["times"][k])[len(acceptance["times"][k]) // 2] for k in ("sliced", "small"))
    result["ratios"] = [
        {
            "area": "moments pass",
            "case": f"1,048,576-row groups read in slices, {ACCEPTANCE_ROWS:,} x {ACCEPTANCE_P} Parquet, "
            "2 workers of 1 GB "
            "(median)",
            "ours_seconds": sliced,
            "baseline": f"the same rows in {SMALL_GROUPS:,}-row groups",
            "baseline_seconds": small,
            "ratio": sliced / small,
        }
    ]
    write_results(result, args.results)


def write_results(r: dict, results: Path) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / "bench_memory.json").write_text(json.dumps(r, indent=1, default=str) + "\n")
    mib = lambda n: f"{n / 2**20:.0f}"  # noqa: E731
    a, c = r["acceptance"], r["check"]
    lines = [
        "# bench_memory: worker floor and memory per partition",
        "",
        f"`.venv/bin/python {r['command']}`, {r['provenance']}; load average {r['load_average'][0]:.1f} at the start, "
        f"{r['load_average'][1]:.1f} at the end. Memory in MiB (2^20 bytes); peaks are the kernel's high-water "
        "mark of the worker process (VmHWM, reset before each pass).",
        "",
        "## Floor: a worker process once the libraries of a pass are imported",
        "",
        "| step | resident MiB |",
        "|---|---|",
        *(f"| {s['step']} | {mib(s['rss'])} |" for s in r["floor"]),
        "",
        "## Memory per partition (1 worker x 1 thread, no limit): peak above the floor",
        "",
        "Each file holds 1.5 row groups of p float64 columns + an int64 group. `estimate` is "
        "`fairpca_dist.engine.memory.PartitionSize.need()` for the largest partition (what the check before a pass "
        "uses); `peak / estimate` must stay below 1.",
        "",
        "| p | rows per row group | reading | pass | partitions | largest partition: rows, decoded MiB | "
        "peak above floor MiB | estimate MiB | peak / estimate | s |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {x['p']} | {x['row_group_rows']:,} | {x['reading']} | {x['pass']} | {x['partitions']} | "
            f"{x['partition_rows']:,}, {mib(x['decoded_bytes'])} | "
            f"{mib(x['peak_above_floor'])} | {mib(x['estimate'])} | "
            f"{x['peak_above_floor'] / x['estimate']:.2f} | {x['seconds']:.1f} |"
            for x in r["partitions"]
        ),
        "",
        f"## {a['rows']:,} x {a['p']} in 1,048,576-row groups on 2 workers of 1 GB",
        "",
        f"Partitions: {a['partitions']['sliced']} (row groups in slices) vs {a['partitions']['small']} "
        f"({SMALL_GROUPS:,}-row groups). Counts equal: {a['counts_equal']}; largest relative difference of means and "
        f"scatter between the two: {a['max_rel_diff']:.1e}.",
        "",
        "| file | seconds per pass | worker peak MiB (max of 2) |",
        "|---|---|---|",
        f"| 1,048,576-row groups, read in slices | {', '.join(f'{t:.2f}' for t in a['times']['sliced'])} | "
        f"{', '.join(mib(p) for p in a['peaks']['sliced'])} |",
        f"| {SMALL_GROUPS:,}-row groups | {', '.join(f'{t:.2f}' for t in a['times']['small'])} | "
        f"{', '.join(mib(p) for p in a['peaks']['small'])} |",
        "",
        f"Ratio of medians: **{r['ratios'][0]['ratio']:.2f}**. Worker pauses or restarts: "
        + ("; ".join(a["events"][:4]) if a["events"] else "none")
        + ".",
        "",
        "## The check before a pass",
        "",
        f"For the 1,048,576-row-group file, one task needs ≈ {mib(c['need'])} MiB (estimate); the smallest memory "
        f"limit `check_workers` accepts for 2 workers x 1 thread is {c['required'] / 1e6:.0f} MB.",
        "",
        "| memory limit | outcome | s | worker peak MiB | pauses or restarts |",
        "|---|---|---|---|---|",
        *(
            f"| {int(limit) / 1e6:.0f} MB | {o['outcome'][:300]} | {o['seconds']:.1f} | {mib(o['peak'])} | "
            f"{len(o['events'])} |"
            for limit, o in c["outcomes"].items()
        ),
    ]
    (results / "bench_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
