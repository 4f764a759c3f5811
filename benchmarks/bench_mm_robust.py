"""``mm-robust`` at scale: a Parquet table of 10 M rows x 20 features on a 2-worker LocalCluster.

    .venv/bin/python benchmarks/bench_mm_robust.py                  # 10,000,000 rows (~15-25 min)
    .venv/bin/python benchmarks/bench_mm_robust.py --plain          # + the paper's plain steps (~12 min more)
    .venv/bin/python benchmarks/bench_mm_robust.py --rows 500000    # smoke test

What it does and measures:

1. Refuses to run unless ``shutil.disk_usage`` shows ≥ max(5 GB, 3 x the table's float64
   size) free under benchmarks/scratch/.
2. Writes the table with ``fairpca_dist.io.datasets.write_synthetic_parquet`` (``row_id``,
   ``f0 … f19``, ``group`` g0/g1 at 70/30 %; files of ``--rows-per-file`` rows) into
   ``scratch/mm_robust_parquet/`` and times it.
3. ``LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GB")``; all passes go
   through ``client``.
4. ``compute_moments(path, sensitive_feature="group", features=f0…f19, client=client)``,
   ``--repeats`` times (the first right after writing: page cache warm, as for every later
   pass): the baseline "one pass over the rows".
5. One ``TablePasses.l1_sums`` call at a new random V, ``--repeats`` times: the pass mm-robust
   makes per iteration, alone.
6. ``fit_projection(moments, r, method="mm-robust", passes=table_passes(...), n_restarts=1,
   max_iter=200)``, all from the ``mm`` start (the paper's), library tol: the previous default
   (``sample_rows=None``: over-relaxed steps, an accepted step one pass, a refused one two),
   then the library default (sample-preconditioned steps: the pass at the ``mm`` start also
   draws the in-memory sample, then one pass per accepted step, two per refused one)
   ``--fit-repeats`` times, and
   with ``--plain`` first ``accelerate=False`` (the paper's Algorithm 4 step for step). For
   each: total wall time, passes over the full rows (``certificate["passes"]``), refused steps,
   status, final ℓ1 objective, the wall time of every ``l1_sums`` pass and of the first pass
   (``l1_sums_sampled`` when it draws the sample; the passes object is wrapped to time them), the
   work on the in-memory sample (``certificate["sample_evaluations"]``), time per pass, rows/s,
   the ratio median pass time / median moments-pass time (expectation: about 1) and the
   driver's share (total − time inside passes, over total). Library defaults otherwise
   (``center="group"``, ``normalize="mean"``), r = ``--r``.

``--previous-from results.json`` takes the over-relaxed fit from an earlier run of this script
on the same table (same ``--rows``, ``--features``, ``--r``, ``--seed``) instead of fitting it
again (~18 min at 10M rows): its path is deterministic, so its passes and objective are those
this run would get, and the file says its wall time and load are the earlier run's. That
file's default fits are shown too, as "before" (the default of the commit that wrote it).

Writes results/mm_robust_scale.{md,json} (``--name``); the table is deleted at the end unless
``--keep`` (``--reuse`` reads a kept table of the same size).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from disk import require_free_disk  # noqa: E402
from provenance import provenance  # noqa: E402

from fairpca_dist import compute_moments, fit_projection  # noqa: E402
from fairpca_dist.engine.passes import table_passes
from fairpca_dist.io.datasets import write_synthetic_parquet
from fairpca_dist.solvers.stiefel import random_orthonormal

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS, SCRATCH = HERE / "results", HERE / "scratch"


class TimedPasses:
    """Wraps a DataPasses: times every ``l1_sums`` and ``l1_sums_sampled`` call (shared logs
    across ``rescaled`` views; the latter's also in ``sample_log``); the pass count is the
    wrapped object's."""

    def __init__(self, inner, log: list[float], sample_log: list[float]):
        self.inner, self.log, self.sample_log, self.groups = inner, log, sample_log, inner.groups

    @property
    def n_passes(self) -> int:
        return self.inner.n_passes

    def rescaled(self, scale):
        return TimedPasses(self.inner.rescaled(scale), self.log, self.sample_log)

    def l1_sums(self, components, centers):
        started = time.perf_counter()
        out = self.inner.l1_sums(components, centers)
        self.log.append(time.perf_counter() - started)
        return out

    def l1_sums_sampled(self, components, centers, max_rows_per_group, seed):
        started = time.perf_counter()
        out = self.inner.l1_sums_sampled(components, centers, max_rows_per_group, seed)
        self.log.append(time.perf_counter() - started)
        self.sample_log.append(self.log[-1])
        return out


MEASURED = ["fairpca_dist/solvers/mm.py", "fairpca_dist/engine/datapasses.py", "fairpca_dist/engine/passes.py"]


def stats(values: list[float]) -> dict:
    return {
        "all": values,
        "median": float(np.median(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
    }


MAX_ITER = 200
EXPECTED_RATIO = 1.2  # "a pass ≈ one moments pass" is called holding when median pass / moments ≤ this


LABELS = {
    "plain": "plain (Algorithm 4)",
    "overrelaxed": "over-relaxed (previous default)",
    "sampled": "sample-preconditioned (default)",
}
OPTIONS = {"plain": {"accelerate": False}, "overrelaxed": {"sample_rows": None}, "sampled": {}}


def fit_robust(moments, passes_factory, r: int, kind: str, seed: int, rows: int, moments_s: float) -> dict:
    log: list[float] = []
    sample_log: list[float] = []
    passes = TimedPasses(passes_factory(), log, sample_log)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = fit_projection(
            moments,
            r,
            method="mm-robust",
            passes=passes,
            n_restarts=1,
            max_iter=MAX_ITER,
            random_state=seed,
            **OPTIONS[kind],
        )
    total = time.perf_counter() - started
    made = int(model.certificate["passes"])
    in_passes = float(np.sum(log))
    history = np.asarray(model.objective_history, dtype=float)
    return {
        "label": LABELS[kind],
        "kind": kind,
        "options": OPTIONS[kind],
        "n_restarts": 1,
        "max_iter": MAX_ITER,
        "tol": float(model.options["tol"]),
        "sample_rows_option": model.options["sample_rows"],
        "seconds": total,
        "passes": made,
        "l1_passes": len(log),
        "sampled_pass_seconds": float(np.sum(sample_log)),
        "sample_rows": int(model.certificate["sample_rows"]),
        "sample_evaluations": int(model.certificate["sample_evaluations"]),
        "n_iter": int(model.n_iter),
        "refused_steps": int(model.certificate["refused_steps"]),
        "status": str(model.status),
        "converged": bool(model.converged),
        "objective_start": float(model.certificate["start_value"]),
        "objective_final": float(history[-1]),
        "seconds_per_pass": total / made,
        "pass_seconds": stats(log),
        "seconds_in_passes": in_passes,
        "driver_seconds": total - in_passes,
        "driver_share": (total - in_passes) / total,
        "rows_per_s": rows * made / total,
        "ratio_per_pass_to_moments": total / made / moments_s,
        "ratio_median_pass_to_moments": float(np.median(log)) / moments_s,
        "load_average_at_start": load,
        "load_average_at_end": os.getloadavg()[0],
        "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
        "last_relative_changes": [float(x) for x in np.diff(history)[-5:] / history[-1]],
        "objective_history": [float(x) for x in history],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument("--r", type=int, default=5, help="n_components")
    parser.add_argument("--repeats", type=int, default=3, help="timed moments passes and single l1 passes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plain", action="store_true", help="also fit with the paper's plain steps (slow)")
    parser.add_argument("--fit-repeats", type=int, default=2, help="fits with the default (sampled) steps")
    parser.add_argument("--name", default="mm_robust_scale", help="<results>/<name>.{md,json}")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="keep the Parquet table in scratch/")
    parser.add_argument("--reuse", action="store_true", help="reuse a kept table of the same size")
    parser.add_argument("--previous-from", type=Path, help="take the over-relaxed fit from this earlier results json")
    args = parser.parse_args()
    previous = reused_previous(args.previous_from, args) if args.previous_from else None
    n, d = args.rows, args.features
    require_free_disk(SCRATCH, max(5e9, 3 * n * (d + 2) * 8), f"{n:,} x {d}")
    folder = SCRATCH / "mm_robust_parquet"
    result: dict = {
        "command": " ".join(["benchmarks/bench_mm_robust.py", *sys.argv[1:]]),
        "provenance": provenance(MEASURED),
        "rows": n,
        "features": d,
        "r": args.r,
        "seed": args.seed,
        "rows_per_file": args.rows_per_file,
        "free_disk_gb_before": shutil.disk_usage(SCRATCH).free / 1e9,
        "load_average_start": os.getloadavg()[0],
    }
    files = sorted(folder.glob("part-*.parquet")) if args.reuse and folder.exists() else []
    started = time.perf_counter()
    if not files or sum(pq.ParquetFile(f).metadata.num_rows for f in files) != n:
        shutil.rmtree(folder, ignore_errors=True)
        print(f"writing {n:,} x {d} to {folder} ...", flush=True)
        write_synthetic_parquet(folder, n, n_features=d, rows_per_file=args.rows_per_file, seed=args.seed)
        files = sorted(folder.glob("part-*.parquet"))
    result["write_seconds"] = time.perf_counter() - started
    result["files"] = len(files)
    result["disk_gb"] = sum(f.stat().st_size for f in files) / 1e9
    print(f"  {len(files)} files, {result['disk_gb']:.2f} GB, {result['write_seconds']:.0f} s", flush=True)

    from distributed import Client, LocalCluster

    features = [f"f{j}" for j in range(d)]
    try:
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GB", dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            moments_times, moments = [], None
            for i in range(args.repeats):
                t0 = time.perf_counter()
                moments = compute_moments(str(folder), sensitive_feature="group", features=features, client=client)
                moments_times.append(time.perf_counter() - t0)
                print(f"moments pass {i + 1}: {moments_times[-1]:.2f} s", flush=True)
            assert moments is not None
            result["moments_pass_seconds"] = stats(moments_times)
            result["group_counts"] = {str(g): int(c) for g, c in zip(moments.groups, moments.count, strict=True)}
            moments_s = result["moments_pass_seconds"]["median"]

            def factory():
                return table_passes(str(folder), moments, sensitive_feature="group", client=client)

            single, passes = [], factory()
            rng = np.random.default_rng(args.seed)
            centers = moments.centers("group")
            for i in range(args.repeats):
                # a new V each time: the same graph again may be answered from results distributed still holds
                v = random_orthonormal(rng, d, args.r)
                t0 = time.perf_counter()
                passes.l1_sums(v, centers)
                single.append(time.perf_counter() - t0)
                print(f"single l1 pass {i + 1}: {single[-1]:.2f} s", flush=True)
            result["single_l1_pass_seconds"] = stats(single)
            result["ratio_single_l1_to_moments"] = result["single_l1_pass_seconds"]["median"] / moments_s

            kinds = (["plain"] if args.plain else []) + ([] if previous else ["overrelaxed"])
            fits = previous or []
            for kind in kinds + ["sampled"] * args.fit_repeats:
                print(f"mm-robust {LABELS[kind]} (n_restarts=1, max_iter={MAX_ITER}) ...", flush=True)
                fits.append(fit_robust(moments, factory, args.r, kind, args.seed, n, moments_s))
                f = fits[-1]
                print(
                    f"  {f['seconds']:.1f} s, {f['passes']} passes ({f['n_iter']} iterations, "
                    f"{f['refused_steps']} refused), {f['status']}, "
                    f"objective {f['objective_final']:.8g}, {f['sample_evaluations']} sample evaluations, "
                    f"median pass / moments {f['ratio_median_pass_to_moments']:.2f}",
                    flush=True,
                )
            result["fits"] = fits
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    result["load_average_end"] = os.getloadavg()[0]
    m = result["moments_pass_seconds"]["median"]
    result["ratios"] = [
        {
            "area": "row-reading passes",
            "case": f"mm-robust ℓ1 pass, {n:,} x {d} Parquet, r = {args.r}",
            "ours_seconds": result["single_l1_pass_seconds"]["median"],
            "baseline": "one `compute_moments` pass of the table",
            "baseline_seconds": m,
            "ratio": result["ratio_single_l1_to_moments"],
        }
    ]
    result["ratios"] += [
        {
            "area": "row-reading passes",
            "case": f"mm-robust fit ({f['label']}), {f['passes']} passes",
            "ours_seconds": f["seconds"],
            "baseline": "one `compute_moments` pass of the table",
            "baseline_seconds": m,
            "ratio": f["seconds"] / m,
        }
        for f in result.get("fits", [])
    ]
    write(result, args.results, args.name)


def reused_previous(path: Path, args: argparse.Namespace) -> list[dict]:
    """The over-relaxed fit of an earlier results json of this script (kept as that file says
    where it came from), and its default fits as "before", refused unless it ran on the same
    table and r."""
    earlier = json.loads(path.read_text())
    same = {"rows": args.rows, "features": args.features, "r": args.r, "seed": args.seed}
    earlier.setdefault("seed", None if "--seed" in earlier["command"] else 0)  # files written before it was kept
    if any(earlier[key] != value for key, value in same.items()):
        raise SystemExit(f"{path} is not a run on the same table: {same}")
    reused = f"{path.name} ({earlier['provenance'].split(';')[0]})"
    fit = next(f for f in earlier["fits"] if f["kind"] == "overrelaxed")
    if "reused_from" not in fit:
        fit = {**fit, "label": f"{fit['label']}, reused from {reused}", "reused_from": reused}
    before = [
        {**f, "kind": "before", "label": f"sample-preconditioned, before (default of {reused})", "reused_from": reused}
        for f in earlier["fits"]
        if f["kind"] == "sampled"
    ]
    return [fit, *before]


def spread(values: list[float], digits: int = 1) -> str:
    return f"{np.median(values):.{digits}f} [{np.min(values):.{digits}f}–{np.max(values):.{digits}f}]"


def write(r: dict, results: Path, name: str) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(r, indent=2, default=str) + "\n")
    m, s = r["moments_pass_seconds"], r["single_l1_pass_seconds"]
    fits = r.get("fits", [])
    fmt = lambda x: f"{x['median']:.2f} [{x['min']:.2f}–{x['max']:.2f}]"  # noqa: E731
    tol = fits[0]["tol"] if fits else float("nan")
    lines = [
        "# mm-robust at scale: passes over the rows, sample-preconditioned vs over-relaxed (and plain) MM",
        "",
        f"`.venv/bin/python {r['command']}` ({r['provenance']}). Table: {r['rows']:,} rows x {r['features']} float64 "
        f"features + row_id + group (write_synthetic_parquet, groups {r['group_counts']}), {r['files']} files, "
        f"{r['disk_gb']:.2f} GB on disk, written in {r['write_seconds']:.0f} s. LocalCluster(n_workers=2, "
        "threads_per_worker=1, memory_limit='2GB'); page cache warm for every pass. "
        f"Load average {r['load_average_start']:.2f} at the start, {r['load_average_end']:.2f} at the end "
        f"(2 shared cores). r = {r['r']}; every fit n_restarts=1 from the `mm` start (the paper's), "
        f'max_iter {MAX_ITER}, tol {tol:g} (library default), center="group", normalize="mean". '
        "Sample-preconditioned = the library default (`accelerate=True`, `sample_rows=50000`: the pass at the "
        "mm start also draws an in-memory sample of ≤ 50,000 rows per group, then each step one pass, a refused "
        'one two; "before" is that default at the commit of the reused json, whose sample took two passes of '
        "its own); "
        "over-relaxed = `sample_rows=None`, the previous default; plain = `accelerate=False` (the paper's "
        f'Algorithm 4). "passes" counts every pass over the {r["rows"]:,} rows; '
        '"sample evaluations" are ℓ1 sums over the in-memory sample (no pass over the table). Times: median '
        "[min–max]; "
        '"median pass / moments" is the median time of one `l1_sums` pass over the median moments pass; '
        '"driver" is the fit\'s wall time outside the passes (the mm start, the work on the sample, surrogate '
        "steps, graph building).",
        "",
        "| what | wall s | passes | status | final ℓ1 objective | s per pass | load at start | median pass / moments "
        "| driver share |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| `compute_moments` (one pass; {len(m['all'])} runs) | {fmt(m)} | 1 | | | {m['median']:.2f} | | 1 | |",
        f"| one `l1_sums` pass at a random V ({len(s['all'])} runs) | {fmt(s)} | 1 | | | {s['median']:.2f} | | "
        f"{r['ratio_single_l1_to_moments']:.2f} | |",
    ]
    for f in fits:
        detail = f"{f['n_iter']} iterations, {f['refused_steps']} refused"
        if f.get("sample_passes"):  # fits of earlier commits drew the sample in passes of its own
            detail += f", {f['sample_passes']} drawing the sample ({f['sample_seconds']:.1f} s)"
        elif f.get("sampled_pass_seconds"):
            detail += f", the first also drawing the sample ({f['sampled_pass_seconds']:.1f} s)"
        lines.append(
            f"| `mm-robust` {f['label']} | {f['seconds']:.1f} | {f['passes']} ({detail}) | {f['status']} | "
            f"{f['objective_final']:.8g} | {f['seconds_per_pass']:.2f} (l1 passes alone {fmt(f['pass_seconds'])}) | "
            f"{f['load_average_at_start']:.2f} | {f['ratio_median_pass_to_moments']:.2f} | "
            f"{100 * f['driver_share']:.1f} % |"
        )
    lines += [""]
    for f in fits:
        lines.append(
            f"{f['label']}: {f['seconds_in_passes']:.1f} s inside the {f['passes']} passes, "
            f"{f['driver_seconds']:.1f} s on the driver"
            + (
                f" ({f['sample_evaluations']} ℓ1 evaluations over the {f['sample_rows']:,}-row sample)"
                if f["sample_rows"]
                else ""
            )
            + f"; ℓ1 objective {f['objective_start']:.8g} at the mm start → {f['objective_final']:.8g}; status "
            f"{f['status']!r}, last relative changes per iteration "
            + ", ".join(f"{c:.1e}" for c in f["last_relative_changes"])
            + (f"; warnings: {'; '.join(f['warnings'])}" if f["warnings"] else "")
            + "."
        )
    ratios = [r["ratio_single_l1_to_moments"]] + [f["ratio_median_pass_to_moments"] for f in fits]
    holds = max(ratios) <= EXPECTED_RATIO
    lines += [
        "",
        "**A pass ≈ one moments pass?** Expectation: one mm-robust pass costs about one moments pass "
        "(ratio ≈ 1): both read every row once and do O(p·r) (ℓ1) or O(p²) (moments) work per row. "
        f"Measured: {', '.join(f'{x:.2f}' for x in ratios)} (single pass"
        + "".join(f", {f['label']}" for f in fits)
        + "). "
        + (
            f"Holds (every ratio ≤ {EXPECTED_RATIO})."
            if holds
            else f"Does not hold at the {EXPECTED_RATIO} threshold: a pass costs up to {max(ratios):.2f} moments "
            "passes."
        ),
    ]
    old = next((f for f in fits if f["kind"] == "overrelaxed"), None)
    new = [f for f in fits if f["kind"] == "sampled"]
    if old and new:
        finals = [f["objective_final"] for f in new]
        rel = [(v - old["objective_final"]) / abs(old["objective_final"]) for v in finals]
        passes = [f["passes"] for f in new]
        where = (
            "same run"
            if "reused_from" not in old
            else f"the previous default's fit taken from {old['reused_from']}: its path is deterministic, its wall "
            f"time is that run's, at load {old['load_average_at_start']:.2f}"
        )
        lines += [
            "",
            f"**Default vs previous default ({where}).** Passes {old['passes']} → "
            f"{spread(passes, 0)} over {len(new)} fits (target ≤ 30: "
            f"{'holds' if max(passes) <= 30 else 'does not hold'}); wall time {old['seconds']:.0f} s → "
            f"{spread([f['seconds'] for f in new])} s ({old['seconds'] / np.median([f['seconds'] for f in new]):.1f}x "
            f"faster); final ℓ1 objective {old['objective_final']:.8g} (over-relaxed, {old['status']}) vs "
            f"{', '.join(f'{v:.8g}' for v in finals)} (sample-preconditioned): relative difference "
            f"{', '.join(f'{x:+.1e}' for x in rel)} (target: not below by more than 1e-6: "
            f"{'holds' if min(rel) >= -1e-6 else 'does not hold'}).",
        ]
    before = [f for f in fits if f["kind"] == "before"]
    if before and new:
        was = before[0]
        finals = [f["objective_final"] for f in new]
        rel = [(f["objective_final"] - was["objective_final"]) / abs(was["objective_final"]) for f in new]
        lines += [
            "",
            f"**Default vs the default before ({was['reused_from']}, its wall time at load "
            f"{was['load_average_at_start']:.2f}).** Passes {was['passes']} → {spread([f['passes'] for f in new], 0)}; "
            f"wall time {was['seconds']:.0f} s → {spread([f['seconds'] for f in new])} s; final ℓ1 objective "
            f"{was['objective_final']:.8g} → {', '.join(f'{v:.8g}' for v in finals)}: relative "
            f"difference {', '.join(f'{x:+.1e}' for x in rel)} (not below by more than 1e-6: "
            f"{'holds' if min(rel) >= -1e-6 else 'does not hold'}).",
        ]
    plain = next((f for f in fits if f["kind"] == "plain"), None)
    if plain and new:
        best = max(f["objective_final"] for f in new)
        reach = next((i + 1 for i, v in enumerate(plain["objective_history"]) if v >= best), None)
        lines += [
            "",
            f"**Plain.** {plain['passes']} passes, {plain['seconds']:.0f} s, final {plain['objective_final']:.8g} "
            f"({plain['status']}); "
            + (
                f"it reached the default's final value after {reach} passes."
                if reach
                else f"it never reached the default's final value within its {plain['passes']} passes."
            ),
        ]
    (results / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
