"""``fnpm-streaming`` against the moments pass + ``fnpm`` on a wide synthetic Parquet table with a
planted fair subspace, on ``LocalCluster(2 workers x 1 thread, 1 GB)`` (issue 34).

    flock /tmp/fairpca-bench.lock .venv/bin/python benchmarks/bench_fnpm.py      # p = 1,000, 60,000 rows
    .venv/bin/python benchmarks/bench_fnpm.py --quick --results benchmarks/scratch/quick   # p = 300, 40,000 rows

The table: ``--rows`` rows of p features in files of ``--rows-per-file`` rows, groups g0/g1 at
60/40 %, with a planted fair subspace F (``planted.py``: the groups differ in mean along u and in
covariance along W, both carrying more variance than F's weakest direction), against which
``fnpm`` (``constraint="all"``, m = 2, r = 3) and plain PCA are scored (sine of the largest
principal angle).

Measured (each pass timed, the workers' peak resident memory above their floor read from the
kernel: ``/proc/<pid>/clear_refs`` then ``VmHWM``, the larger of the two workers):

1. the moments pass, ``compute_moments(path, client=...)``, ``--repeats`` times, then ``fnpm``
   from the moments on the driver (its time);
2. one ``TablePasses.scatter_products`` pass at a random U of q = m + r + 2s + 1 columns (the
   pass ``fnpm-streaming`` makes per iteration), ``--repeats`` times;
3. ``fit_projection(moments, 3, method="fnpm-streaming", passes=table_passes(...))`` at the
   default tolerance: wall, passes, status, worker peak.

Ratios: one streaming pass / one moments pass (medians), the streaming fit / (moments pass +
``fnpm``); the subspace distances to F and between the two fits. At p = 2,000 (files of 5,000
rows) the moments pass did not finish on these workers: a tree-merge task holding eight
(2, 2001, 2001) partial results passed the 1 GB limit and the workers restarted in a loop (run
of 2026-11-28), hence the default p = 1,000. What each pass returns per
partition (k (p + 1)² float64 for the moments, k p q for the streaming pass) is computed, and
at p = 20,000 the moments' 6.4 GB per partition exceed a 1 GB worker: the streaming fit of such
a table waits for the wide-table mode (issue 34), since ``fit_projection`` still takes p × p moments.
Writes ``<results>/fnpm.{md,json}``; the table is deleted unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from disk import require_free_disk  # noqa: E402
from planted import N_UNFAIR, R, planted, write_table  # noqa: E402
from provenance import provenance  # noqa: E402

from fairpca_dist import compute_moments, fit_projection  # noqa: E402
from fairpca_dist.engine.passes import table_passes  # noqa: E402
from fairpca_dist.solvers.stiefel import random_orthonormal, subspace_distance  # noqa: E402

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "scratch"
OVERSAMPLE = 5


# ---------------------------------------------------------------- run inside the workers
def reset_peak() -> int:
    """Reset this process's high-water mark of resident memory; its current size."""
    import psutil

    Path("/proc/self/clear_refs").write_text("5")
    return psutil.Process().memory_info().rss


def peak() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


# ---------------------------------------------------------------- the driver
def measured(client, run) -> tuple[float, int, object]:
    """Seconds, the larger worker's peak resident memory above its floor, and the result of ``run()``."""
    floors = client.run(reset_peak)
    started = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - started
    peaks = client.run(peak)
    return seconds, max(peaks[w] - floors[w] for w in peaks), result


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def text(values: dict[str, float], unit: str = " s") -> str:
    return f"{values['median']:.3g}{unit} [{values['min']:.3g}–{values['max']:.3g}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="p = 300, 40,000 rows, 2 repeats")
    parser.add_argument("--features", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--rows-per-file", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.features, args.rows, args.repeats = 300, 40_000, 2
    p, folder = args.features, SCRATCH / "fnpm_parquet"
    require_free_disk(SCRATCH, 3 * 8 * args.rows * p, "the fnpm table")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    load_start = os.getloadavg()
    started = time.perf_counter()
    write_table(folder, args.rows, p, args.rows_per_file, args.seed)
    written = time.perf_counter() - started
    fair, _, _ = planted(p, args.seed)

    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit="1GB", dashboard_address=None, processes=True
        ) as cluster,
        Client(cluster) as client,
    ):
        moments_runs = [
            measured(client, lambda: compute_moments(str(folder), sensitive_feature="group", client=client))
            for _ in range(args.repeats)
        ]
        moments = moments_runs[-1][2]
        begun = time.perf_counter()
        closed = fit_projection(moments, R, method="fnpm", n_unfair=N_UNFAIR)
        closed_seconds = time.perf_counter() - begun
        passes = table_passes(str(folder), moments, sensitive_feature="group", client=client)
        q = N_UNFAIR + R + 2 * OVERSAMPLE + 1
        block = random_orthonormal(np.random.default_rng(1), p, q)
        pass_runs = [
            measured(client, lambda: passes.scatter_products(block, moments.mean)) for _ in range(args.repeats)
        ]
        fit_passes = table_passes(str(folder), moments, sensitive_feature="group", client=client)
        fit_seconds, fit_peak, streaming = measured(
            client,
            lambda: fit_projection(
                moments, R, method="fnpm-streaming", passes=fit_passes, n_unfair=N_UNFAIR, random_state=0
            ),
        )
    load_end = os.getloadavg()
    moments_time = spread([s for s, _, _ in moments_runs])
    pass_time = spread([s for s, _, _ in pass_runs])
    n_passes = int(streaming.certificate["passes"])
    result = {
        "provenance": provenance(["fairpca_dist/solvers/fnpm_streaming.py", "fairpca_dist/engine/datapasses.py"]),
        "table": {"rows": args.rows, "features": p, "files": len(list(folder.glob("*.parquet"))), "write_s": written},
        "cluster": "LocalCluster(2 workers x 1 thread, memory_limit=1GB)",
        "load_average_start": load_start,
        "load_average_end": load_end,
        "moments_pass_s": moments_time,
        "moments_pass_worker_peak_mb": max(m for _, m, _ in moments_runs) / 1e6,
        "fnpm_driver_s": closed_seconds,
        "scatter_pass_s": pass_time,
        "scatter_pass_worker_peak_mb": max(m for _, m, _ in pass_runs) / 1e6,
        "streaming_fit_s": fit_seconds,
        "streaming_fit_worker_peak_mb": fit_peak / 1e6,
        "streaming_passes": n_passes,
        "streaming_status": streaming.status,
        "streaming_s_per_pass": fit_seconds / n_passes,
        "subspace_error_fnpm_vs_planted": subspace_distance(closed.components, fair),
        "subspace_error_streaming_vs_planted": subspace_distance(streaming.components, fair),
        "streaming_vs_fnpm": subspace_distance(streaming.components, closed.components),
        "pca_vs_planted": subspace_distance(fit_projection(moments, R, method="pca").components, fair),
        "per_partition_mb": {
            "moments": 2 * (p + 1) ** 2 * 8 / 1e6,
            "streaming_pass": 2 * p * q * 8 / 1e6,
            "moments_at_p_20000": 2 * 20_001**2 * 8 / 1e6,
            "streaming_pass_at_p_20000": 2 * 20_000 * q * 8 / 1e6,
        },
    }
    where = f"{args.rows:,} x {p} Parquet, r = {R}, m = {N_UNFAIR}"
    result["ratios"] = [
        {
            "area": "row-reading passes",
            "case": f"fnpm-streaming pass (scatter products, q = {q}), {where}",
            "ours_seconds": pass_time["median"],
            "baseline": "one `compute_moments` pass of the table",
            "baseline_seconds": moments_time["median"],
            "ratio": pass_time["median"] / moments_time["median"],
        },
        {
            "area": "row-reading passes",
            "case": f"fnpm-streaming fit ({n_passes} passes, {streaming.status}), {where}",
            "ours_seconds": fit_seconds,
            "baseline": "one `compute_moments` pass + `fnpm` from the moments",
            "baseline_seconds": moments_time["median"] + closed_seconds,
            "ratio": fit_seconds / (moments_time["median"] + closed_seconds),
        },
    ]
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "fnpm.json").write_text(json.dumps(result, indent=1))
    (args.results / "fnpm.md").write_text(report(result))
    print(report(result))
    if not args.keep:
        shutil.rmtree(folder)


def report(result: dict) -> str:
    table, sizes = result["table"], result["per_partition_mb"]
    loads = [tuple(round(v, 2) for v in result[key]) for key in ("load_average_start", "load_average_end")]
    q = N_UNFAIR + R + 2 * OVERSAMPLE + 1
    fit = f"`fnpm-streaming` fit: {result['streaming_passes']} passes, {result['streaming_status']}"
    fit_time = f"{result['streaming_fit_s']:.3g} s ({result['streaming_s_per_pass']:.3g} s per pass)"
    ratios = "; ".join(f"{r['case']} / {r['baseline']} = **{r['ratio']:.2f}**" for r in result["ratios"])
    lines = [
        f"# fnpm-streaming vs the moments pass + fnpm ({table['rows']:,} x {table['features']:,}, "
        "planted fair subspace)",
        "",
        result["provenance"],
        "",
        f"{result['cluster']}; {table['files']} Parquet files; load average (1, 5, 15 min) at the start "
        f"{loads[0]}, at the end {loads[1]}. Times: median [min–max] over the repeats.",
        "",
        "| what | time | worker peak above floor |",
        "|---|---|---|",
        f"| moments pass (`compute_moments`) | {text(result['moments_pass_s'])} | "
        f"{result['moments_pass_worker_peak_mb']:.0f} MB |",
        f"| `fnpm` from the moments (driver) | {result['fnpm_driver_s']:.3g} s | — |",
        f"| one `scatter_products` pass (q = {q}) | {text(result['scatter_pass_s'])} | "
        f"{result['scatter_pass_worker_peak_mb']:.0f} MB |",
        f"| {fit} | {fit_time} | {result['streaming_fit_worker_peak_mb']:.0f} MB |",
        "",
        f"Ratios: {ratios}.",
        "",
        "Subspace error (sine of the largest principal angle) against the planted fair subspace F: "
        f"`fnpm` {result['subspace_error_fnpm_vs_planted']:.2e}, `fnpm-streaming` "
        f"{result['subspace_error_streaming_vs_planted']:.2e} (plain PCA {result['pca_vs_planted']:.2f}); "
        f"`fnpm-streaming` vs `fnpm` {result['streaming_vs_fnpm']:.2e}.",
        "",
        f"Per-partition results: the moments pass returns k (p + 1)² float64 = {sizes['moments']:.1f} MB, a "
        f"streaming pass k p q = {sizes['streaming_pass']:.2f} MB. At p = 20,000 these are "
        f"{sizes['moments_at_p_20000']:,.0f} MB (more than a 1 GB worker holds) and "
        f"{sizes['streaming_pass_at_p_20000']:.1f} MB; the streaming fit of such a table needs the wide-table "
        "mode (issue 34), as `fit_projection` still takes p × p moments.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
