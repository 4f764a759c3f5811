"""Scaling of the moments pass: ``compute_moments`` time against rows and against features.

    .venv/bin/python benchmarks/bench_scaling.py                  # full (~15-25 min, ~20 GB free disk)
    .venv/bin/python benchmarks/bench_scaling.py --quick --results benchmarks/scratch/quick   # < 3 min

Options: --rows (in-memory row counts, default 1e5,1e6,1e7; quick 1e5,1e6), --features (default
10,50,200,500,1000,2000; quick up to 500), --feature-rows (200,000), --ooc-rows (out-of-core
row counts, default 1e8; none with --quick; e.g. --ooc-rows 2000000 for a smoke test of that
path), --rounds (5; 3 with --quick), --keep (keep the Parquet folder in scratch/), --results
(folder for scaling.{md,json} and the PNGs; default benchmarks/results).

(a) Rows, p = 10, 2 groups (70 / 30 %, group-specific means and scales, an offset of 3 on every
    column), float64 in memory: ours = ``compute_moments(X, sensitive_feature=groups)`` on the
    numpy array (dask's threaded scheduler, 2 threads; the library limits BLAS to 1 thread per
    task), baseline = numpy ``X.T @ X`` of the whole array, ungrouped, with 2 BLAS threads
    (``threadpoolctl``): the practical limit on these 2 cores (bench_moments.py's case (a)).
    Out of core (full mode: 1e8 rows): a Parquet folder written by
    ``fairpca_dist.io.datasets.write_synthetic_parquet`` (p = 10, 2 groups, 500,000 rows per file:
    8 GB of float64 features, ~9 GB of files), read by ``compute_moments(folder,
    sensitive_feature="group", features=[f0..f9], client=client)`` on ``LocalCluster(2 workers
    x 1 thread, memory_limit="1GB")``: 2 GB of worker memory for the table. The whole array
    would take 8 GB of this shared VM's memory, so the baseline there is the same numpy Gram
    streamed file by file (pyarrow ``read_table`` + ``X.T @ X``, 2 BLAS threads, one process).
    The free disk is checked first (>= 2.5 x the table); when short, that size is skipped with a
    message in the results.
(b) Features p in {10, 50, 200, 500, 1000, 2000} at 200,000 rows in memory, same ours and baseline.

Every in-memory case runs once untimed, then ``--rounds`` rounds of (ours, baseline) in
alternating order, each after a 0.5 s pause (OpenBLAS threads spin ~0.1 s after a 2-thread
call; bench_moments.py). Reported: median [min–max] seconds, rows/s and GB/s of features
(8·n·p bytes) from the median, the ratio ours / baseline of the medians and the median of the
within-round ratios (> 1: ours slower), and the relative error of ours' pooled Gram
Σ_g (S_g + n_g μ_g μ_gᵀ) against the baseline's (Frobenius, about the origin). Out of core:
2 passes (the first after the write, with whatever the page cache holds), then 2 baseline reads.
No timing asserts. Load averages are recorded before and after every case.

Writes <results>/scaling.{md,json} (json with a flat ``ratios`` list for benchmarks/run_all.py,
area "moments scaling") and <results>/moments_vs_rows.png, moments_vs_features.png (log-log,
ours and baseline, ours' rows/s written at each point). Generated Parquet goes to
benchmarks/scratch/scaling_parquet and is deleted at the end unless --keep.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", str(os.cpu_count() or 1))  # before numpy: the baseline uses 2

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from provenance import provenance  # noqa: E402

from fairpca_dist import compute_moments  # noqa: E402
from fairpca_dist.io.datasets import write_synthetic_parquet  # noqa: E402

SCRATCH = HERE / "scratch"
PAUSE = 0.5
BASELINE_THREADS = 2
SHARES = (0.7, 0.3)
BASELINE = f"numpy X.T @ X in memory, {BASELINE_THREADS} BLAS threads"
OOC_BASELINE = f"numpy X.T @ X file by file (pyarrow read), {BASELINE_THREADS} BLAS threads"


def parse_counts(text: str) -> list[int]:
    return [int(float(v)) for v in text.split(",") if v]


def make_data(n: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two groups (70 / 30 %) with their own means and scales, every column offset by 3."""
    rng = np.random.default_rng([seed, n, p])
    groups = (rng.random(n) >= SHARES[0]).astype(np.int64)
    x = rng.standard_normal((n, p))
    x *= (1.0 + 0.5 * groups)[:, None]
    x += 3.0 + rng.standard_normal((len(SHARES), p))[groups]
    return x, groups


def pooled_gram(moments) -> np.ndarray:
    """Σ_g (S_g + n_g μ_g μ_gᵀ): the Gram about the origin from ours."""
    return sum(s + n * np.outer(mu, mu) for s, n, mu in zip(moments.scatter, moments.count, moments.mean, strict=True))


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def baseline_gram(x: np.ndarray) -> np.ndarray:
    with threadpool_limits(limits=BASELINE_THREADS, user_api="blas"):
        return x.T @ x


def time_in_memory(x: np.ndarray, groups: np.ndarray, rounds: int) -> dict:
    """Untimed warm-up, then ``rounds`` rounds of ours and the baseline, alternating the order."""
    load_before = os.getloadavg()[0]
    ours_fn = lambda: compute_moments(x, sensitive_feature=groups)  # noqa: E731
    base_fn = lambda: baseline_gram(x)  # noqa: E731
    moments, gram = ours_fn(), base_fn()
    ours, base = [], []
    for k in range(rounds):
        for which in ("ours", "base") if k % 2 == 0 else ("base", "ours"):
            time.sleep(PAUSE)
            started = time.perf_counter()
            if which == "ours":
                moments = ours_fn()
                ours.append(time.perf_counter() - started)
            else:
                gram = base_fn()
                base.append(time.perf_counter() - started)
    return summarise(ours, base, x.shape[0], x.shape[1], rel(pooled_gram(moments), gram), load_before)


def summarise(ours: list[float], base: list[float], n: int, p: int, error: float | None, load_before: float) -> dict:
    o, b = float(np.median(ours)), float(np.median(base))
    within = float(np.median([a / c for a, c in zip(ours, base, strict=True)]))
    return {
        "rows": n,
        "features": p,
        "ours_times": ours,
        "baseline_times": base,
        "ours_seconds": o,
        "baseline_seconds": b,
        "ratio": o / b,
        "ratio_within_rounds": within,
        "ours_rows_per_s": n / o,
        "baseline_rows_per_s": n / b,
        "ours_gb_per_s": 8 * n * p / o / 1e9,
        "baseline_gb_per_s": 8 * n * p / b / 1e9,
        "rel_err_vs_baseline": error,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def out_of_core(n: int, keep: bool) -> dict:
    """Write the synthetic Parquet table, 2 passes of ours on LocalCluster(2 x 1, 1 GB), 2 streamed baselines."""
    p = 10
    folder = SCRATCH / "scaling_parquet"
    need = 2.5 * n * (p + 2) * 8
    shutil.rmtree(folder, ignore_errors=True)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(SCRATCH).free
    if free < need:
        message = (
            f"skipped: {free / 1e9:.1f} GB free under {SCRATCH}, need {need / 1e9:.1f} GB for {n:,} x {p} as Parquet"
        )
        print(message, flush=True)
        return {"rows": n, "features": p, "skipped": message}
    load_before = os.getloadavg()[0]
    print(f"writing {n:,} x {p} with write_synthetic_parquet ...", flush=True)
    started = time.perf_counter()
    write_synthetic_parquet(folder, n, n_features=p, rows_per_file=500_000)
    write_seconds = time.perf_counter() - started
    files = sorted(folder.glob("*.parquet"))
    disk = sum(f.stat().st_size for f in files)
    print(f"  {len(files)} files, {disk / 1e9:.2f} GB, {write_seconds:.0f} s", flush=True)
    features = [f"f{j}" for j in range(p)]

    from distributed import Client, LocalCluster

    ours, base, moments, gram = [], [], None, None
    try:
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB", dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            for k in range(2):
                time.sleep(PAUSE)
                started = time.perf_counter()
                moments = compute_moments(str(folder), sensitive_feature="group", features=features, client=client)
                ours.append(time.perf_counter() - started)
                print(f"  ours pass {k + 1}: {ours[-1]:.1f} s", flush=True)
        for k in range(2):
            time.sleep(PAUSE)
            started = time.perf_counter()
            gram = np.zeros((p, p))
            with threadpool_limits(limits=BASELINE_THREADS, user_api="blas"):
                for path in files:
                    table = pq.read_table(path, columns=features)
                    x = np.column_stack([table.column(c).to_numpy() for c in features])
                    gram += x.T @ x
            base.append(time.perf_counter() - started)
            print(f"  baseline read {k + 1}: {base[-1]:.1f} s", flush=True)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    out = summarise(ours, base, n, p, rel(pooled_gram(moments), gram), load_before)
    out["ratio_within_rounds"] = None  # the passes and the baseline reads are not interleaved
    out.update(
        out_of_core=True,
        files=len(files),
        disk_gb=disk / 1e9,
        write_seconds=write_seconds,
        cluster="LocalCluster(n_workers=2, threads_per_worker=1, memory_limit='1GB')",
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="rows up to 1e6, features up to 500, 3 rounds")
    parser.add_argument("--rows", type=parse_counts, default=None)
    parser.add_argument("--features", type=parse_counts, default=None)
    parser.add_argument("--feature-rows", type=int, default=200_000)
    parser.add_argument("--ooc-rows", type=parse_counts, default=None, help="'' for none")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the Parquet folder in scratch/")
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument(
        "--render",
        type=Path,
        default=None,
        help="only rewrite scaling.md and the PNGs in --results from this scaling.json",
    )
    args = parser.parse_args()
    if args.render:
        result = json.loads(args.render.read_text())
        write_outputs(result, args.results)
        return
    rows = args.rows or ([100_000, 1_000_000] if args.quick else [100_000, 1_000_000, 10_000_000])
    features = args.features or ([10, 50, 200, 500] if args.quick else [10, 50, 200, 500, 1000, 2000])
    ooc = args.ooc_rows if args.ooc_rows is not None else ([] if args.quick else [100_000_000])
    rounds = args.rounds or (3 if args.quick else 5)
    custom = any(v is not None for v in (args.rows, args.features, args.ooc_rows, args.rounds))
    mode = ("quick" if args.quick else "full") + (" with overrides" if custom else "")
    command = "benchmarks/bench_scaling.py" + "".join(f" {a}" for a in sys.argv[1:])
    prov = provenance(
        [
            "benchmarks/bench_scaling.py",
            "fairpca_dist/engine/passes.py",
            "fairpca_dist/engine/moments.py",
            "fairpca_dist/engine/sources.py",
            "fairpca_dist/io/datasets.py",
        ]
    )
    load_start = os.getloadavg()
    started = time.perf_counter()

    by_rows = []
    for n in rows:
        x, groups = make_data(n, 10)
        by_rows.append(time_in_memory(x, groups, rounds))
        print(line(by_rows[-1]), flush=True)
        del x, groups
    for n in ooc:
        by_rows.append(out_of_core(n, args.keep))
        if "skipped" not in by_rows[-1]:
            print(line(by_rows[-1]), flush=True)
    by_features = []
    for p in features:
        x, groups = make_data(args.feature_rows, p)
        by_features.append(time_in_memory(x, groups, rounds))
        print(line(by_features[-1]), flush=True)
        del x, groups

    result = {
        "command": command,
        "provenance": prov,
        "mode": mode,
        "rounds": rounds,
        "baseline": BASELINE,
        "ooc_baseline": OOC_BASELINE,
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "wall_seconds": time.perf_counter() - started,
        "by_rows": by_rows,
        "by_features": by_features,
    }
    result["ratios"] = [
        {
            "area": "moments scaling",
            "case": case_name(c),
            "ours_seconds": c["ours_seconds"],
            "baseline": OOC_BASELINE if c.get("out_of_core") else BASELINE,
            "baseline_seconds": c["baseline_seconds"],
            "ratio": c["ratio"],
        }
        for c in by_rows + by_features
        if "skipped" not in c
    ]
    write_outputs(result, args.results)


def case_name(c: dict) -> str:
    where = "Parquet, LocalCluster 2x1 1 GB" if c.get("out_of_core") else "in memory"
    return f"rows={rows_text(c['rows'])} p={c['features']} ({where})"


def rows_text(n: int) -> str:
    """1e+07 -> 1e7; 2000000 -> 2e6."""
    mantissa, exponent = f"{n:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def line(c: dict) -> str:
    within = c["ratio_within_rounds"]
    return (
        f"{case_name(c):>45}: ours {c['ours_seconds']:.4f} s ({c['ours_rows_per_s'] / 1e6:.2f} M rows/s), "
        f"baseline {c['baseline_seconds']:.4f} s, ratio {c['ratio']:.2f} (within rounds "
        f"{'–' if within is None else format(within, '.2f')}), rel err {c['rel_err_vs_baseline']:.1e}, "
        f"load {c['load_after']:.2f}"
    )


def table(cases: list[dict]) -> list[str]:
    out = [
        "| rows | p | where | ours s (median [min–max]) | ours M rows/s | ours GB/s | baseline s "
        "(median [min–max]) | baseline GB/s | ours / baseline (medians; within rounds; best times) | rel. err | "
        "load before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        if "skipped" in c:
            out.append(f"| {rows_text(c['rows'])} | {c['features']} | Parquet | {c['skipped']} | | | | | | | |")
            continue
        where = (
            f"Parquet ({c['files']} files, {c['disk_gb']:.1f} GB), LocalCluster 2 x 1 thread, 1 GB each; "
            "baseline streamed"
            if c.get("out_of_core")
            else "in memory"
        )
        o, b = c["ours_times"], c["baseline_times"]
        out.append(
            f"| {rows_text(c['rows'])} | {c['features']} | {where} | "
            f"{c['ours_seconds']:.4g} [{min(o):.4g}–{max(o):.4g}] | "
            f"{c['ours_rows_per_s'] / 1e6:.3g} | {c['ours_gb_per_s']:.3g} | {c['baseline_seconds']:.4g} "
            f"[{min(b):.4g}–{max(b):.4g}] | {c['baseline_gb_per_s']:.3g} | **{c['ratio']:.2f}**; "
            f"{'– (not interleaved)' if c.get('out_of_core') else format(c['ratio_within_rounds'], '.2f')}; "
            f"{min(o) / min(b):.2f} | "
            f"{c['rel_err_vs_baseline']:.1e} | {c['load_before']:.2f} → "
            f"{c['load_after']:.2f} |"
        )
    return out


def write_outputs(r: dict, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scaling.json").write_text(json.dumps(r, indent=1) + "\n")
    plot(
        [c for c in r["by_rows"] if "skipped" not in c],
        "rows",
        "rows (n), p = 10",
        "compute_moments against rows",
        folder / "moments_vs_rows.png",
    )
    plot(
        r["by_features"],
        "features",
        f"features (p), {r['by_features'][0]['rows']:,} rows" if r["by_features"] else "features",
        "compute_moments against features",
        folder / "moments_vs_features.png",
    )
    la, lb = r["load_average_start"], r["load_average_end"]
    lines = [
        "# Moments pass scaling: compute_moments against rows and features, numpy X.T @ X beside",
        "",
        f"`.venv/bin/python {r['command']}` ({r['mode']} mode, {r['wall_seconds'] / 60:.1f} min); {r['provenance']}.",
        "",
        f"Load average (1/5/15 min) at the start {' / '.join(f'{v:.2f}' for v in la)}, at the end "
        f"{' / '.join(f'{v:.2f}' for v in lb)} (2 cores shared with other jobs; each case's 1-min load is in "
        "the table).",
        "",
        "Ours: `compute_moments(X, sensitive_feature=groups)` on a float64 numpy array (threaded scheduler, "
        f"2 threads, 1 BLAS thread per task), 2 groups 70 / 30 %. Baseline in the same run: {r['baseline']}, "
        "ungrouped (the practical limit). Out of core: `write_synthetic_parquet` folder on LocalCluster(2 "
        f"workers x 1 thread, memory_limit='1GB'), baseline {r['ooc_baseline']}. Each in-memory case: a warm-up, "
        f"then {r['rounds']} rounds alternating the order, 0.5 s pause before every timing; out of core: 2 "
        "passes, then 2 baseline reads (not interleaved). Ratio = ours / baseline time (> 1: ours slower). "
        "rel. err: ours' pooled Gram Σ_g (S_g + n_g μ_g μ_gᵀ) against the baseline's.",
        "",
        "## (a) against rows, p = 10",
        "",
        *table(r["by_rows"]),
        "",
        "## (b) against features",
        "",
        *table(r["by_features"]),
        "",
        "Plots: `moments_vs_rows.png`, `moments_vs_features.png` (log-log, median seconds with min–max bars, "
        "M rows/s of ours and of the baseline at each point). JSON: every timing, and the flat `ratios` list.",
    ]
    (folder / "scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def plot(cases: list[dict], key: str, xlabel: str, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    for ooc, marker, suffix in ((False, "o", "in memory"), (True, "s", "Parquet, LocalCluster 2 x 1, 1 GB")):
        part = sorted((c for c in cases if bool(c.get("out_of_core")) == ooc), key=lambda c: c[key])
        if not part:
            continue
        xs = [c[key] for c in part]
        for times, median, colour, style, label in (
            ("ours_times", "ours_seconds", "C0", "-", f"ours, {suffix}"),
            (
                "baseline_times",
                "baseline_seconds",
                "C1",
                "--",
                f"baseline, {'streamed file by file' if ooc else 'X.T @ X'}",
            ),
        ):
            ys = np.array([c[median] for c in part])
            spread = np.array([[y - min(c[times]), max(c[times]) - y] for c, y in zip(part, ys, strict=True)]).T
            ax.errorbar(xs, ys, yerr=spread, marker=marker, color=colour, ls=style, capsize=3, label=label)
        for c in part:
            ax.annotate(
                f"{c['ours_rows_per_s'] / 1e6:.2g} M rows/s",
                (c[key], c["ours_seconds"]),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=7,
                color="C0",
            )
            ax.annotate(
                f"{c['baseline_rows_per_s'] / 1e6:.2g}",
                (c[key], c["baseline_seconds"]),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=6,
                color="C1",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=xlabel,
        ylabel="wall time, s (median, bars: min–max)",
        title=f"{title} (labels: M rows/s, ours / baseline)",
    )
    ax.margins(x=0.12, y=0.12)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
