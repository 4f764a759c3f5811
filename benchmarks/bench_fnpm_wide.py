"""The wide path at p = 20,000 on ``LocalCluster(2 workers x 1 thread, 1 GB)``: ``fnpm-streaming``
completes where the moments pass cannot (issue 34).

    flock /tmp/fairpca-bench.lock .venv/bin/python benchmarks/bench_fnpm_wide.py   # 10,000 x 20,000, ~30 min
    .venv/bin/python benchmarks/bench_fnpm_wide.py --quick          # 20,000 x 2,000, ~3 min

The table (``planted.py``, the model of ``bench_fnpm.py``): ``--rows`` rows of p float64 features
and a group column, written file by file (``--rows-per-file`` rows, one file in memory at a
time, one row group per file as pandas and pyarrow write it, which the library reads in slices of
≤ 64 MiB decoded, at most 2,048 columns at a time), with a planted fair subspace F (r = 3)
and an unfair subspace N (a mean shift and m = 2 directions of group-specific variance, larger
than F's weakest), F ⊥ N, isotropic noise elsewhere. At p = 20,000 one row is 160 KB and the
p × p moments of the two groups 6.4 GB: above the 1 GB budget (``params.choose_wide``) and
above what a 1 GB worker holds.

In one ``LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB")`` started by this
process, each step timed, the RSS of every worker process sampled every 20 ms
(``bench_out_of_core.RssSampler``: its peak per process, restarted workers included) and the
load average read before and after:

1. the wide moments pass, ``compute_file_moments(files, diagonal=True)`` (what ingest keeps
   for a wide table: count, mean and the diagonal of the scatter per file and group), merged;
2. ``table_passes(source, moments)``: opening the table for the row passes (driver only);
3. ``fit_projection(moments, 3, method="fnpm-streaming", passes=..., n_unfair=2)``: wall,
   passes (``certificate["passes"]``), status, worker peaks and restarts;
4. the ordinary moments pass, ``compute_file_moments(files[:1])`` (p × p, one file) on the
   same cluster, with a timeout (``--moments-timeout``): what the library says (its error
   line), the worker restarts it caused, the memory its result needs; then the cluster closes.

Not through ``ingest_table`` / ``fit_table``: at p = 20,000 ingest does not finish (its
write-back of each partition, ``io.storage.write_parquet``, is quadratic in the number of
columns: see the results file), so the benchmark calls the functions they call. The
``fnpm-streaming`` fit is scored by the sine of the largest principal angle to F, against the
level the sample size allows (``planted.expected_error``); plain PCA misses F by construction
(sine 1: W's first direction, variance 6.4, outranks F's third, 5). ``--quick`` (p = 2,000,
where the p × p moments fit on the driver) also fits the in-memory ``fnpm`` and ``pca`` from the
full moments (computed after the cluster is closed, threaded scheduler) and reports their angles
to F and the angle between ``fnpm-streaming`` and ``fnpm``. Writes ``<results>/<name>.{md,json}``
(``fnpm_wide``, with ``--quick`` ``fnpm_wide_quick``); the table is deleted unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from dask.utils import parse_bytes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_out_of_core import RssSampler, log_lines, run_with_timeout  # noqa: E402
from disk import require_free_disk  # noqa: E402
from planted import N_UNFAIR, R, expected_error, planted, write_table  # noqa: E402
from provenance import provenance  # noqa: E402

from fairpca_dist import compute_moments, fit_projection  # noqa: E402
from fairpca_dist.engine.moments import GroupMoments  # noqa: E402
from fairpca_dist.engine.passes import compute_file_moments, table_passes  # noqa: E402
from fairpca_dist.engine.sources import PARQUET_PARTITION_BYTES  # noqa: E402
from fairpca_dist.params import choose_wide  # noqa: E402
from fairpca_dist.solvers.fnpm_streaming import subspace_change  # noqa: E402
from fairpca_dist.wording import size_text  # noqa: E402

SCRATCH = HERE / "scratch" / "fnpm_wide"
MEASURED = [
    "fairpca_dist/solvers/fnpm_streaming.py",
    "fairpca_dist/engine/datapasses.py",
    "fairpca_dist/engine/passes.py",
]
CLUSTER = "LocalCluster(n_workers=2, threads_per_worker=1, memory_limit='1GB')"
MEMORY_LIMIT = 1e9


def machine() -> str:
    import dask
    import pyarrow

    return (
        f"{platform.machine()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"dask {dask.__version__}, pyarrow {pyarrow.__version__}"
    )


def step(client: Any, run: Callable[[], Any], timeout: float) -> tuple[Any, dict[str, Any]]:
    """Run ``run()`` in a thread for at most ``timeout`` seconds while the workers' RSS is
    sampled; its result (None if it failed or timed out) and what was measured: seconds, the
    error line (``Type: message``, or the timeout), peak RSS per worker process seen (MB), the
    processes that died, whether workers were restarted, the load average before and after."""
    before = sorted(client.run(os.getpid).values()) if client is not None else []
    load_before = os.getloadavg()
    sampler = RssSampler()
    sampler.start()
    result, error, seconds = run_with_timeout(run, timeout)
    sampler.stop()
    sampler.join()
    peaks = {pid: rss / 1e6 for pid, rss in sampler.peak.items()}
    return result, {
        "seconds": seconds,
        "error": error,
        "worker_peak_rss_mb": [peaks[pid] for pid in sorted(peaks)],
        "worker_processes_seen": len(peaks),
        "worker_processes_died": len(sampler.dead),
        "restarted": len(peaks) > len(before) or bool(sampler.dead),
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="p = 2,000, 20,000 rows, and the in-memory fnpm")
    parser.add_argument("--features", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rows-per-file", type=int, default=1_000)
    parser.add_argument("--moments-timeout", type=float, default=120.0, help="seconds for the moments pass")
    parser.add_argument("--step-timeout", type=float, default=1800.0, help="seconds for any other step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--name", help="results file name (default fnpm_wide, with --quick fnpm_wide_quick)")
    parser.add_argument("--scratch", type=Path, default=SCRATCH, help="where the table is written")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.features, args.rows, args.rows_per_file, args.moments_timeout = 2_000, 20_000, 1_000, 120.0
    name = args.name or ("fnpm_wide_quick" if args.quick else "fnpm_wide")
    p, rows = args.features, args.rows
    source = args.scratch / "source"
    require_free_disk(args.scratch, 1.5 * 8 * rows * p, "the table")
    shutil.rmtree(args.scratch, ignore_errors=True)
    source.mkdir(parents=True)
    load_start = os.getloadavg()
    result: dict[str, Any] = {
        "provenance": provenance(MEASURED),
        "machine": machine(),
        "cluster": CLUSTER,
        "load_average_start": load_start,
    }
    started = time.perf_counter()
    # one row group per file, as pandas and pyarrow write a file of fewer than 2**20 rows: the
    # library reads it in slices of at most PARQUET_PARTITION_BYTES, at most 2,048 columns at a time
    row_group_rows = args.rows_per_file
    write_table(source, rows, p, args.rows_per_file, args.seed, row_group_rows=row_group_rows)
    result["table"] = {
        "rows": rows,
        "features": p,
        "rows_per_file": args.rows_per_file,
        "row_group_rows": row_group_rows,
        "files": len(list(source.glob("*.parquet"))),
        "bytes": sum(f.stat().st_size for f in source.glob("*.parquet")),
        "write_s": time.perf_counter() - started,
    }
    fair, _, _ = planted(p, args.seed)
    result["expected_error"] = expected_error(rows, p)
    features = [f"f{j}" for j in range(p)]  # listed: else open_table types each column through dask
    steps: dict[str, dict[str, Any]] = {}
    result["wide_reason"] = choose_wide(p, 2).reason
    files = [str(f) for f in sorted(source.glob("*.parquet"))]

    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, memory_limit="1GB", dashboard_address=None, processes=True
    )
    client = Client(cluster)
    streaming = None
    try:
        result["worker_floor_mb"] = sorted(
            rss / 1e6 for rss in client.run(lambda: psutil.Process().memory_info().rss).values()
        )
        parts, steps["diagonal"] = step(
            client,
            lambda: compute_file_moments(
                files, sensitive_feature="group", features=features, diagonal=True, client=client
            ),
            args.step_timeout,
        )
        if parts is not None:
            moments = sum(parts[1:], parts[0])
            passes, steps["open"] = step(
                client,
                lambda: table_passes(str(source), moments, sensitive_feature="group", client=client),
                args.step_timeout,
            )
            streaming, steps["fnpm-streaming"] = step(
                client,
                lambda: fit_projection(
                    moments, R, method="fnpm-streaming", passes=passes, n_unfair=N_UNFAIR, random_state=0
                ),
                args.step_timeout,
            )
        _, steps["moments"] = step(
            client,
            lambda: compute_file_moments(files[:1], sensitive_feature="group", features=features, client=client),
            args.moments_timeout,
        )
        steps["moments"]["log_lines"] = log_lines(client)[-20:]
    finally:
        close_started = time.perf_counter()
        client.close(timeout=60)
        cluster.close(timeout=60)
        result["cluster_close_s"] = time.perf_counter() - close_started
    result["steps"] = steps
    if streaming is not None:
        steps["fnpm-streaming"].update(
            passes=int(streaming.certificate["passes"]),
            status=streaming.status,
            error_vs_planted=subspace_change(fair, streaming.components),
        )
    result["per_partition_mb"] = {
        "moments": 2 * (p + 1) ** 2 * 8 / 1e6,
        "streaming_pass": 2 * p * (N_UNFAIR + R + 2 * 5 + 1) * 8 / 1e6,
        "partition": min(8 * row_group_rows * p, parse_bytes(PARQUET_PARTITION_BYTES)) / 1e6,
    }
    if args.quick and streaming is not None:
        result["in_memory"] = in_memory(source, streaming, fair)
    result["load_average_end"] = os.getloadavg()
    result["ratios"] = ratios(result)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{name}.json").write_text(json.dumps(result, indent=1))
    (args.results / f"{name}.md").write_text(report(result))
    print(report(result))
    if not args.keep:
        shutil.rmtree(args.scratch)


def in_memory(source: Path, streaming: Any, fair: np.ndarray) -> dict[str, float]:
    """``fnpm`` and ``pca`` from the full moments of the table (threaded scheduler, on this
    machine, no cluster), their angles to F and ``fnpm-streaming``'s angle to ``fnpm``."""
    started = time.perf_counter()
    moments = compute_moments(str(source), sensitive_feature="group")
    assert isinstance(moments, GroupMoments)
    moments_s = time.perf_counter() - started
    started = time.perf_counter()
    closed = fit_projection(moments, R, method="fnpm", n_unfair=N_UNFAIR)
    fnpm_s = time.perf_counter() - started
    pca = fit_projection(moments, R, method="pca")
    return {
        "moments_s": moments_s,
        "fnpm_s": fnpm_s,
        "fnpm_vs_planted": subspace_change(fair, closed.components),
        "pca_vs_planted": subspace_change(fair, pca.components),
        "streaming_vs_fnpm": subspace_change(closed.components, streaming.components),
    }


def ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One streaming pass (the fit's time over its passes) against the wide moments pass over
    the same rows (a read of every row with k × p numbers per partition): what a pass costs."""
    steps, table = result["steps"], result["table"]
    fit, read = steps.get("fnpm-streaming", {}), steps.get("diagonal", {})
    if "passes" not in fit or read.get("error") is not None:
        return []
    per_pass = fit["seconds"] / fit["passes"]
    return [
        {
            "area": "row-reading passes",
            "case": f"fnpm-streaming pass, wide, {table['rows']:,} x {table['features']:,} Parquet, r = {R}, "
            f"m = {N_UNFAIR} ({fit['passes']} passes, {fit['status']})",
            "ours_seconds": per_pass,
            "baseline": "the wide moments pass (`compute_file_moments(diagonal=True)`) of the table",
            "baseline_seconds": read["seconds"],
            "ratio": per_pass / read["seconds"],
        }
    ]


def _peaks(measured: dict[str, Any]) -> str:
    """The table's two last cells: peak RSS of each worker process seen, and the restarts."""
    peaks = " / ".join(f"{mb:.0f}" for mb in measured["worker_peak_rss_mb"])
    new, died = max(measured["worker_processes_seen"] - 2, 0), measured["worker_processes_died"]
    return f"{peaks} MB | {f'{new} new processes, {died} died' if measured['restarted'] else 'none'}"


def report(result: dict[str, Any]) -> str:
    table, steps, sizes = result["table"], result["steps"], result["per_partition_mb"]
    expected = result["expected_error"]
    loads = [tuple(round(v, 2) for v in result[key]) for key in ("load_average_start", "load_average_end")]
    p, rows = table["features"], table["rows"]
    lines = [
        f"# The wide path: fnpm-streaming on {rows:,} x {p:,} (planted fair subspace), where the moments pass cannot",
        "",
        result["provenance"],
        "",
        f"{result['machine']}. {result['cluster']}, started by the benchmark; worker floor "
        f"{' / '.join(f'{v:.0f}' for v in result.get('worker_floor_mb', []))} MB. Load average (1, 5, 15 min) "
        f"at the start {loads[0]}, at the end {loads[1]}. One run of each step (the full table costs a "
        "minute per pass); the spread of a pass is in the per-pass numbers of `bench_fnpm.py`.",
        "",
        f"Table: {rows:,} rows x {p:,} float64 features + group (g1 40 %), {table['files']} Parquet files of "
        f"{table['rows_per_file']:,} rows in row groups of {table['row_group_rows']:,} (read in slices of at most "
        "64 MiB), "
        f"{size_text(table['bytes'])}, written file by file in "
        f"{table['write_s']:.0f} s. The largest partition is {sizes['partition']:.0f} MB of float64; the p × p moments "
        f"of a partition, k (p + 1)² float64 = {size_text(sizes['moments'] * 1e6)}; a streaming pass returns "
        f"k p q = {sizes['streaming_pass']:.1f} MB per partition (q = 16).",
        "",
        "| step | wall | result | peak RSS per worker process | worker restarts |",
        "|---|---|---|---|---|",
    ]
    names = {
        "diagonal": "wide moments pass (`compute_file_moments(diagonal=True)`, every file)",
        "open": "`table_passes(source, moments)` (opens the table, driver only)",
        "fnpm-streaming": f"`fit_projection(method='fnpm-streaming')`, m = {N_UNFAIR}, r = {R}",
        "moments": "the p × p moments pass (`compute_file_moments`, one file)",
    }
    for key, label in names.items():
        if key not in steps:
            continue
        measured = steps[key]
        outcome = measured["error"] or (
            f"{measured['passes']} passes, {measured['status']}" if "passes" in measured else "done"
        )
        lines.append(f"| {label} | {measured['seconds']:.1f} s | {outcome} | {_peaks(measured)} |")
    fit = steps.get("fnpm-streaming", {})
    lines += ["", f"`choose_wide({p:,}, 2)`: {result['wide_reason']}.", ""]
    if "error_vs_planted" in fit:
        per_pass = fit["seconds"] / fit["passes"]
        lines += [
            f"Streaming fit: {fit['seconds']:.0f} s, {fit['passes']} passes, {per_pass:.1f} s per pass "
            f"({per_pass / steps['diagonal']['seconds']:.2f} x the wide moments pass, "
            f"{steps['diagonal']['seconds']:.1f} s).",
            "",
            "Subspace error (sine of the largest principal angle) against the planted fair subspace F: "
            f"`fnpm-streaming` **{fit['error_vs_planted']:.3f}**. Expected from the sample (noise σ² = 0.09, "
            f"n = {rows:,}, p = {p:,}; `planted.expected_error`): {expected['low']:.3f} from the noise alone "
            f"(sin² ≈ (p − 6)/n · σ²(ℓ + σ²)/ℓ², ℓ = 5 the weakest direction of F) to {expected['high']:.3f} with the "
            "tilt of the estimated unfair directions into F (mean difference and Q's eigenvectors, estimated from "
            "the same rows). Plain PCA takes W's first direction (variance 0.4 · 16 = 6.4) over F's third (5): "
            "an angle of 90° (sine 1).",
        ]
    moments = steps.get("moments")
    if moments is not None:
        lines += [
            "",
            f"The moments pass ({moments['seconds']:.0f} s, timeout "
            f"{'reached' if (moments['error'] or '').startswith('Hung') else 'not reached'}): "
            f"{moments['error'] or 'completed'}. Its per-partition result, k (p + 1)² float64 = "
            f"{size_text(sizes['moments'] * 1e6)}, is {sizes['moments'] * 1e6 / MEMORY_LIMIT:.1f} x a worker's "
            "1 GB limit.",
        ]
        if moments["log_lines"]:
            lines += ["", "Worker and nanny log lines about memory (last 20):", "", "```"]
            lines += [line[:300] for line in moments["log_lines"]] + ["```"]
    if "in_memory" in result:
        mem = result["in_memory"]
        lines += [
            "",
            f"In memory (p = {p:,}: the p × p moments fit on the driver; threaded scheduler, no cluster, "
            f"{mem['moments_s']:.1f} s for the moments, {mem['fnpm_s']:.2f} s for `fnpm`): `fnpm` vs F "
            f"{mem['fnpm_vs_planted']:.3f}, PCA vs F {mem['pca_vs_planted']:.3f}; **`fnpm-streaming` vs `fnpm` "
            f"{mem['streaming_vs_fnpm']:.1e}**.",
        ]
    lines += ["", *NOTES]
    return "\n".join(lines) + "\n"


NOTES = (
    "Notes on the method (2-core machine):",
    "",
    "- Not through `ingest_table` / `fit_table`, which ingest then fit the same way: the benchmark calls what "
    "`fit_table` calls on a wide table (the per-file diagonal moments, `table_passes`, `fit_projection`), to time "
    "each.",
    "- The run at 1c3c475 shared the machine for part of the fit with a test suite (load 2.4–3.6), and the 1 GB "
    "workers paused at distributed's 80 % threshold ~1,000 times (floor 370 MB; a task holds its ≤ 64 MiB slice, "
    "≈ 170 MB more while it reads and multiplies, and the footer it parses): the times are an upper bound.",
    "- What made this run possible (main since 2407db6, where the wide moments pass killed the workers): files of "
    "more than 1,000 columns are read by `engine.parquet_slices`, at most 2,048 columns at a time (dask's reader "
    "decoded all 20,000 at once, ≈ 7 KB of pyarrow buffers each); a folder of them is planned without dask's "
    "row-group statistics (quadratic in the columns: minutes per file); the reader returns the pages pyarrow's "
    "allocator freed (mimalloc kept ~100 MB per slice, and the workers sat paused with nothing running); a "
    "differing dtype is converted column by column (`astype(dict)` visited every column: half a slice's time).",
    "- Footers: every task parses its file's whole footer, ≈ 6–9× its serialized size; 20 row groups of 20,000 "
    "columns make a 47 MB footer, 290–430 MB in every task (the previous layout of this benchmark). The table is "
    "written one row group per file, as pandas and pyarrow do; the memory check counts the footer.",
    "- Each streaming pass sends a ~13.5 MB graph (every task carries the 20,000-column meta) and decodes ≈ 0.1 ms "
    "per column chunk: ≈ 2 s of pyarrow per 64 MiB slice.",
)


if __name__ == "__main__":
    main()
