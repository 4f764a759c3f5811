"""``compare_table`` (every method, every criterion, in one comparison) against the same fits made
one by one, each reading the data itself (issue 15, "Measure").

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_compare.py                    # credit, then Adult
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_compare.py --datasets credit --repeats 1

Datasets (each ingested once with ``ingest_table`` into ``scratch/``, deleted at the end unless ``--keep``):

* **credit**: Default of Credit Card Clients (``pelegrina_fpca/default_degree.csv``, header row 1),
  features ``columns[2:23]`` (SEX … PAY_AMT5, as ``tests/conftest.py``), group ``education`` =
  "high" for EDUCATION in {1, 2} else "low", target ``default``, key ``ID``; r = 2, 3.
* **Adult**: ``datasets_mmd.load_adult`` (45,222 x 97, the binarised sex column stays a feature),
  group ``group`` = sex (1 = Male), target ``income``, key ``row_id``; r = 2.

Arms (same methods, same grid points — ``COMPARE_GRIDS`` — same r, ``center="group"``,
``standardize=True``, ``random_state=0``, 10 hash cells of the key, 7 training cells):

* **compare**: ``compare_table(table_dir, out_dir, n_components=..., methods=..., target=...,
  cache_dir=<fresh tmp>)`` — its cell-moments pass really runs. Wall time of the whole call,
  and separately the time of the report it writes (``write_comparison``, timed by wrapping it).
* **baseline**: what a user without ``compare`` does, for every candidate of the comparison:
  (a) ``compute_moments`` of the table (1 pass), ``fit_projection(..., standardize=True,
  random_state=0, passes=table_passes(...) if it reads rows)``, ``score_projection`` in sample;
  (b) ``compute_moments(..., cells=HashCells(key, 10))`` (1 pass, its own), ``.union`` of the
  training cells and of the test cells (both from that one pass), the fit on the training union
  (row-reading methods through ``table_passes(..., cells=...).restricted(split.train)``; the
  scale is the training rows' ``feature_scale(0, constant="keep")``, as the comparison does),
  ``score_projection(model, train, test)``; (c) ``metrics.mmd2_rbf(..., estimator="rff")`` of
  the in-sample fit (1 pass, D = 1000, seed 0); (d) ``report.downstream_parity`` of that fit
  alone on a row sample drawn once (``sample_rows``, 2 passes, the comparison's sample).
  σ of the RBF kernel: once per r, as the comparison computes it (a moments pass, the PCA fit,
  ``metrics.rbf_bandwidth``: 2 passes), handed to (c) and to the ``mmd`` fits.

Every pass goes through ``fairpca_dist.engine.passes.run_graph``; it is wrapped to count them (as
``tests/test_comparison.py``'s ``count_passes``). The baseline's numbers are checked against the
comparison's for every candidate (explained variance, max loss, ABDiff, linear MMD² in sample and
on the test cells, RBF MMD², downstream accuracy and DP difference), abs. difference ≤ 1e-6.
Results: ``results/compare.{md,json}``. Arms of a dataset alternate (compare, baseline,
compare, ...); the load average is recorded before and after every run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS, SCRATCH = HERE / "results", HERE / "scratch"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from provenance import provenance  # noqa: E402

import fairpca_dist.assessment.table_comparison as table_comparison  # noqa: E402
import fairpca_dist.engine.passes as passes_module  # noqa: E402
from fairpca_dist import compute_moments, fit_projection  # noqa: E402
from fairpca_dist.assessment import metrics  # noqa: E402
from fairpca_dist.assessment.comparison import check_comparison  # noqa: E402
from fairpca_dist.assessment.evaluation import plan_splits  # noqa: E402
from fairpca_dist.assessment.report import downstream_parity  # noqa: E402
from fairpca_dist.assessment.scoring import score_projection  # noqa: E402
from fairpca_dist.assessment.table_comparison import DOWNSTREAM_SAMPLE_ROWS, compare_table  # noqa: E402
from fairpca_dist.engine.cells import HashCells  # noqa: E402
from fairpca_dist.engine.passes import sample_rows, table_passes  # noqa: E402
from fairpca_dist.io.ingest import ingest_table, read_schema, table_source  # noqa: E402
from fairpca_dist.solvers import SOLVERS  # noqa: E402

CREDIT_CSV = ROOT.parent / "shared" / "data" / "pelegrina_fpca" / "default_degree.csv"
DEFAULT_R = {"credit": [2, 3], "Adult": [2]}
DEFAULT_EXCLUDE = {"Adult": ["olfat-sdp"]}
N_CELLS, TRAIN_FRACTION, SEED = 10, 0.7, 0
TOL = 1e-6
CHECKED = ("explained_variance_ratio", "max_loss", "abdiff", "mmd2_linear")

# ---- pass counting ------------------------------------------------------------------------
PASS_LOG: list[str] = []
_REAL_RUN_GRAPH = passes_module.run_graph


def _counting_run_graph(*args: Any, **kwargs: Any) -> Any:
    PASS_LOG.append(kwargs.get("label", "pass"))
    return _REAL_RUN_GRAPH(*args, **kwargs)


passes_module.run_graph = _counting_run_graph

REPORT_SECONDS: list[float] = []
_REAL_WRITE = table_comparison.write_comparison


def _timed_write(*args: Any, **kwargs: Any) -> Any:
    started = time.perf_counter()
    try:
        return _REAL_WRITE(*args, **kwargs)
    finally:
        REPORT_SECONDS.append(time.perf_counter() - started)


table_comparison.write_comparison = _timed_write


# ---- data -----------------------------------------------------------------------------------
def credit_frame() -> tuple[pd.DataFrame, dict[str, Any]]:
    raw = pd.read_csv(CREDIT_CSV, header=1)
    features = list(raw.columns[2:23])
    frame = raw[["ID"]].copy()
    frame[features] = raw[features].astype(np.float64)
    frame["education"] = np.where(raw["EDUCATION"].isin([1, 2]), "high", "low")
    frame["default"] = raw["default payment next month"].astype(int)
    return frame, {"sensitive": "education", "key": "ID", "target": "default"}


def adult_frame() -> tuple[pd.DataFrame, dict[str, Any]]:
    from datasets_mmd import LOADERS

    x, y, a, _ = LOADERS["Adult"]()
    frame = pd.concat([pd.DataFrame({"row_id": np.arange(len(x))}), x], axis=1)
    frame["group"] = np.where(a == 1, "male", "female")
    frame["income"] = y.astype(int)
    return frame, {"sensitive": "group", "key": "row_id", "target": "income"}


FRAMES = {"credit": credit_frame, "Adult": adult_frame}


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


# ---- arm 1: the comparison -----------------------------------------------------------------
def run_compare(table_dir: Path, ranks: list[int], methods: list[str] | None, target: str, work: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    out = Path(tempfile.mkdtemp(prefix="report-", dir=work))
    PASS_LOG.clear()
    REPORT_SECONDS.clear()
    load_before = load_avg()
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comparison = compare_table(
            table_dir,
            out,
            n_components=ranks,
            methods=methods,
            target=target,
            n_cells=N_CELLS,
            train_fraction=TRAIN_FRACTION,
            random_state=SEED,
            cache_dir=cache,
        )
    wall = time.perf_counter() - started
    counted = len(PASS_LOG)
    shutil.rmtree(cache)
    shutil.rmtree(out)
    candidates = []
    for c in comparison.candidates:
        candidates.append(
            {
                "key": candidate_key(c.method, c.params, c.n_components),
                "label": c.label,
                "method": c.method,
                "n_components": c.n_components,
                "status": c.status,
                "seconds": c.seconds,
                "passes": c.passes,
                "values": candidate_values(c),
                "_components": None if c.model is None else c.model.components,
            }
        )
    return {
        "arm": "compare",
        "wall": wall,
        "report_seconds": sum(REPORT_SECONDS),
        "comparison_seconds": comparison.seconds,
        "passes": counted,
        "passes_by_purpose": dict(comparison.passes),
        "passes_reported": int(sum(comparison.passes.values())),
        "fits": 2 * len(comparison.candidates),
        "candidates": candidates,
        "sigma": comparison.settings["sigma"],
        "load_before": load_before,
        "load_after": load_avg(),
    }


def candidate_key(method: str, params: dict, r: int) -> str:
    return f"{method} {json.dumps(params, sort_keys=True, default=str)} r={r}"


def candidate_values(c: Any) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key in CHECKED:
        out[f"in_{key}"] = c.value(key, "in")
        out[f"test_{key}"] = c.value(key, "test")
    out["rbf_mmd2"] = c.value("rbf_mmd2")
    out["accuracy"] = c.value("accuracy")
    out["dp_difference"] = c.value("dp_difference")
    return out


# ---- arm 2: one by one --------------------------------------------------------------------
def run_baseline(table_dir: Path, ranks: list[int], methods: list[str] | None, target: str) -> dict:
    schema = read_schema(table_dir)
    source = table_source(table_dir)
    sensitive, features = schema["sensitive_feature"], schema["features"]
    cells = HashCells(tuple(schema["key_columns"]), N_CELLS, seed=0)
    plans, ranks_ = check_comparison(methods, ranks, len(features), target=target)
    split = plan_splits(range(N_CELLS), n_splits=1, train_fraction=TRAIN_FRACTION, n_folds=2, random_state=SEED)[0]
    PASS_LOG.clear()
    load_before = load_avg()
    started = time.perf_counter()
    steps: dict[str, float] = {}

    def timed(step: str, func: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            steps[step] = steps.get(step, 0.0) + time.perf_counter() - t0

    # the downstream classifier's row sample, drawn once (2 passes), as compare_table draws it
    sample = timed(
        "downstream sample",
        sample_rows,
        source,
        columns=[*features, *sensitive, target],
        max_rows=DOWNSTREAM_SAMPLE_ROWS,
        seed=SEED,
    )
    candidates = []
    n_fits = 0
    sigmas: dict[str, float] = {}
    for r in ranks_:
        # σ of the RBF MMD² (median heuristic at this r's PCA projection): once per r
        before = len(PASS_LOG)
        total = timed("sigma", compute_moments, source, sensitive_feature=sensitive, features=features)
        rows = table_passes(source, total, sensitive_feature=sensitive)
        pca = fit_projection(total, r, method="pca", standardize=True, random_state=SEED)
        sigma = timed(
            "sigma",
            metrics.rbf_bandwidth,
            total.rescaled(pca.scale),
            rows.rescaled(pca.scale),
            pca.components,
            seed=SEED,
        )
        sigma_passes = len(PASS_LOG) - before
        sigmas[str(r)] = sigma
        for plan in plans:
            for params in plan.grid:
                options = {**plan.fixed, **params}
                reads = SOLVERS[plan.method].reads_rows(options)
                if reads and plan.method == "mmd":
                    options["sigma"] = sigma
                entry: dict[str, Any] = {
                    "key": candidate_key(plan.name, params, r),
                    "method": plan.name,
                    "n_components": r,
                    "reads_rows": reads,
                }
                before = len(PASS_LOG)
                t0 = time.perf_counter()
                values: dict[str, float | None] = {}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        # (a) in sample: own moments pass, fit, score
                        moments = timed(
                            "moments pass (in sample)",
                            compute_moments,
                            source,
                            sensitive_feature=sensitive,
                            features=features,
                        )
                        rows = table_passes(source, moments, sensitive_feature=sensitive, cells=cells)
                        t_fit = time.perf_counter()
                        model = timed(
                            "fit in sample",
                            fit_projection,
                            moments,
                            r,
                            method=plan.method,
                            standardize=True,
                            random_state=SEED,
                            passes=rows if reads else None,
                            **options,
                        )
                        scores = score_projection(model, moments)
                        entry["_components"], entry["_scale"] = model.components, model.scale
                        entry["fit_seconds"] = time.perf_counter() - t_fit
                        n_fits += 1
                        entry["status"] = model.status
                        for key in CHECKED:
                            values[f"in_{key}"] = scalar(scores, key)
                        # (b) out of sample: own per-cell moments pass, fit on the training cells
                        by_cell = timed(
                            "cell moments pass (out of sample)",
                            compute_moments,
                            source,
                            sensitive_feature=sensitive,
                            features=features,
                            cells=cells,
                            min_group_size=1,
                        )
                        train = by_cell.union(split.train)
                        test = by_cell.union(split.test, min_group_size=1)
                        try:
                            held_out = timed(
                                "fit out of sample",
                                fit_projection,
                                train,
                                r,
                                method=plan.method,
                                standardize=train.feature_scale(0, constant="keep"),
                                random_state=SEED,
                                passes=rows.restricted(split.train) if reads else None,
                                **options,
                            )
                            n_fits += 1
                            test_scores = score_projection(held_out, train, test)
                            for key in CHECKED:
                                values[f"test_{key}"] = scalar(test_scores, key)
                        except Exception as error:  # noqa: BLE001
                            entry["test_error"] = f"{type(error).__name__}: {error}"
                        # (c) RBF MMD² by random features: its own pass
                        matrix = timed(
                            "rbf mmd2 pass",
                            metrics.mmd2_rbf,
                            moments.rescaled(model.scale),
                            rows.rescaled(model.scale),
                            model.components,
                            sigma,
                            estimator="rff",
                            n_random_features=1000,
                            random_state=SEED,
                        )
                        values["rbf_mmd2"] = float(np.max(matrix))
                        # (d) downstream classifier on the sample drawn once
                        down = timed(
                            "downstream classifier",
                            downstream_parity,
                            sample,
                            features=features,
                            sensitive=sensitive,
                            target=target,
                            models={"m": model},
                            random_state=SEED,
                        )
                        values["accuracy"] = down["models"]["m"]["accuracy"]
                        values["dp_difference"] = down["models"]["m"]["demographic_parity_difference"]
                    except Exception as error:  # noqa: BLE001
                        entry["status"] = f"failed: {type(error).__name__}: {error}"
                entry["seconds"] = time.perf_counter() - t0
                entry["passes"] = len(PASS_LOG) - before
                entry["values"] = values
                candidates.append(entry)
    wall = time.perf_counter() - started
    return {
        "arm": "baseline",
        "wall": wall,
        "passes": len(PASS_LOG),
        "fits": n_fits,
        "steps": steps,
        "sigma_passes_per_r": sigma_passes,
        "candidates": candidates,
        "sigma": sigmas,
        "load_before": load_before,
        "load_after": load_avg(),
    }


def scalar(scores: Any, key: str) -> float:
    if key == "mmd2_linear":
        return float(np.max(scores.mmd2_linear))
    return float(getattr(scores, key))


# ---- agreement ------------------------------------------------------------------------------
def agreement(compare: dict, baseline: dict, table_dir: Path) -> dict:
    """Every value of every candidate, |compare − baseline| ≤ TOL · max(1, |compare|); the
    in-sample subspaces (largest principal-angle sine); σ per r. The random-feature RBF MMD² is
    not a function of the subspace alone (a fixed draw of features is not rotation invariant), so
    where the two arms' bases differ within the same subspace it is re-evaluated, untimed, on the
    comparison's basis with the baseline's own machinery (``metrics.mmd2_rbf``, one pass each)."""
    by_key = {c["key"]: c for c in baseline["candidates"]}
    worst: dict[str, float] = {}
    bad: list[str] = []
    missing: list[str] = []
    rotated: list[str] = []
    recheck: list[tuple[dict, dict]] = []
    max_sine = 0.0
    for c in compare["candidates"]:
        b = by_key.get(c["key"])
        if b is None:
            missing.append(c["key"])
            continue
        same_basis = True
        if c.get("_components") is not None and b.get("_components") is not None:
            cosines = np.linalg.svd(c["_components"].T @ b["_components"], compute_uv=False)
            sine = float(np.sqrt(max(0.0, 1.0 - float(np.min(cosines)) ** 2)))
            r = c["_components"].shape[1]
            if all(np.allclose(v.T @ v, np.eye(r), atol=1e-8) for v in (c["_components"], b["_components"])):
                max_sine = max(max_sine, sine)  # principal angles only between orthonormal bases
            same_basis = bool(np.abs(c["_components"] - b["_components"]).max() <= 1e-6)
            if not same_basis and sine <= 1e-4:
                rotated.append(f"{c['label']} r={c['n_components']}")
        for name, value in c["values"].items():
            other = b["values"].get(name)
            if value is None and other is None:
                continue
            if value is None or other is None:
                bad.append(f"{c['label']} r={c['n_components']} {name}: {value} vs {other}")
                continue
            diff = abs(value - other)
            worst[name] = max(worst.get(name, 0.0), diff / max(1.0, abs(value)))
            if not diff <= TOL * max(1.0, abs(value)):
                if name == "rbf_mmd2" and not same_basis:
                    recheck.append((c, b))
                    continue
                bad.append(f"{c['label']} r={c['n_components']} {name}: {value:.10g} vs {other:.10g}")
    rechecked = []
    if recheck:
        schema = read_schema(table_dir)
        source = table_source(table_dir)
        moments = compute_moments(source, sensitive_feature=schema["sensitive_feature"], features=schema["features"])
        rows = table_passes(source, moments, sensitive_feature=schema["sensitive_feature"])
        for c, b in recheck:
            sigma = baseline["sigma"][str(c["n_components"])]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = float(
                    np.max(
                        metrics.mmd2_rbf(
                            moments.rescaled(b["_scale"]),
                            rows.rescaled(b["_scale"]),
                            c["_components"],
                            sigma,
                            estimator="rff",
                            n_random_features=1000,
                            random_state=SEED,
                        )
                    )
                )
            ok = abs(value - c["values"]["rbf_mmd2"]) <= TOL * max(1.0, abs(value))
            rechecked.append(
                {
                    "candidate": f"{c['label']} r={c['n_components']}",
                    "compare": c["values"]["rbf_mmd2"],
                    "baseline_own_basis": b["values"]["rbf_mmd2"],
                    "baseline_on_compare_basis": value,
                    "ok": ok,
                }
            )
            if not ok:
                bad.append(
                    f"{c['label']} r={c['n_components']} rbf_mmd2 on the comparison's basis: "
                    f"{c['values']['rbf_mmd2']:.10g} vs {value:.10g}"
                )
    sigma_diff = max(abs(float(compare["sigma"][r]) - float(baseline["sigma"][r])) for r in baseline["sigma"])
    if sigma_diff > TOL:
        bad.append(f"sigma differs by {sigma_diff:.3g}")
    return {
        "max_rel_diff": worst,
        "disagreements": bad,
        "missing": missing,
        "n_candidates": len(compare["candidates"]),
        "max_subspace_sine": max_sine,
        "same_subspace_other_basis": rotated,
        "rbf_rechecked_on_compare_basis": rechecked,
        "sigma_max_abs_diff": sigma_diff,
        "ok": not bad and not missing,
    }


def strip(run: dict) -> dict:
    """The run without the in-memory components (not written to JSON)."""
    return {**run, "candidates": [{k: v for k, v in c.items() if not k.startswith("_")} for c in run["candidates"]]}


# ---- report ---------------------------------------------------------------------------------
def med(values: list[float]) -> float:
    return float(statistics.median(values))


def spread(values: list[float]) -> str:
    return f"{min(values):.1f}–{max(values):.1f}" if len(values) > 1 else "1 run"


def ratios(results: dict) -> list[dict]:
    """Per table: compare_table's wall time over the one-by-one baseline's (median runs), for run_all.py."""
    out = []
    for name, data in results["datasets"].items():
        runs_c = [r for r in data["runs"] if r["arm"] == "compare"]
        runs_b = [r for r in data["runs"] if r["arm"] == "baseline"]
        if runs_c and runs_b:
            wc, wb = med([r["wall"] for r in runs_c]), med([r["wall"] for r in runs_b])
            out.append(
                {
                    "area": "comparison",
                    "case": f"`compare_table` on {name} ({runs_c[0]['fits']} fits, "
                    f"{runs_c[0]['passes']} vs {runs_b[0]['passes']} passes)",
                    "ours_seconds": wc,
                    "baseline": "the same fits and scores one by one, each reading the data",
                    "baseline_seconds": wb,
                    "ratio": wc / wb,
                }
            )
    return out


def write_report(results: dict, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    clean = {
        **results,
        "datasets": {
            name: {**data, "runs": [strip(r) for r in data["runs"]]} for name, data in results["datasets"].items()
        },
        "ratios": ratios(results),
    }
    (folder / "compare.json").write_text(json.dumps(clean, indent=1, default=str) + "\n")
    lines = [
        "# `compare_table` vs the same fits one by one",
        "",
        f"`{results['command']}`",
        "",
        f"{results['provenance']}. Started {results['started']}, finished {results.get('finished', '(running)')}; "
        f"load average (1 min) {results['load_before']} before, {results.get('load_after', '?')} after "
        "(2 shared cores; another long benchmark ran on one of them throughout). OPENBLAS_NUM_THREADS=1, dask's "
        "threaded scheduler, the table ingested once into Parquet (not timed).",
        "",
        "Arms (module docstring of `bench_compare.py`): **compare** = one `compare_table` call with a fresh "
        "moments cache (its wall time includes writing the report; the wall without it is beside); **baseline** "
        "= every candidate fitted and scored on its own: a moments pass + fit + in-sample scores, its own "
        "per-cell moments pass (train and test unions from that one pass) + fit on the training cells + "
        "test scores, one random-feature pass for its RBF MMD² (D = 1000, same σ and seed), the downstream "
        "classifier on the same row sample (drawn once, 2 passes); σ once per r (1 moments + 2 sample passes). "
        "Passes counted by wrapping `fairpca_dist.engine.passes.run_graph`. 'fits' counts fit_projection calls "
        "(in sample + out of sample).",
        "",
    ]
    for name, data in results["datasets"].items():
        lines += [f"## {name}", "", data["description"], ""]
        runs_c = [r for r in data["runs"] if r["arm"] == "compare"]
        runs_b = [r for r in data["runs"] if r["arm"] == "baseline"]
        if not runs_c:
            lines += ["(no run)", ""]
            continue
        wc = [r["wall"] for r in runs_c]
        wc_nr = [r["wall"] - r["report_seconds"] for r in runs_c]
        lines += [
            "| arm | wall s (median) | spread (min–max) | runs | passes over the rows |"
            " fits | ratio baseline/compare |",
            "|---|---|---|---|---|---|---|",
        ]
        lines.append(
            f"| compare (`compare_table`, with report) | {med(wc):.1f} | {spread(wc)} | {len(wc)} | "
            f"{runs_c[0]['passes']} | {runs_c[0]['fits']} | 1 |"
        )
        lines.append(
            f"| compare without writing the report | {med(wc_nr):.1f} | {spread(wc_nr)} | {len(wc)} | "
            f"{runs_c[0]['passes']} | {runs_c[0]['fits']} | – |"
        )
        if runs_b:
            wb = [r["wall"] for r in runs_b]
            lines.append(
                f"| baseline (one by one) | {med(wb):.1f} | {spread(wb)} | {len(wb)} | {runs_b[0]['passes']} | "
                f"{runs_b[0]['fits']} | wall {med(wb) / med(wc):.1f}x (vs compare without report "
                f"{med(wb) / med(wc_nr):.1f}x); passes {runs_b[0]['passes'] / runs_c[0]['passes']:.1f}x |"
            )
        lines.append("")
        c0 = runs_c[0]
        lines += [
            "Comparison's own passes by purpose (`Comparison.passes`): "
            + ", ".join(f"{k} {v}" for k, v in c0["passes_by_purpose"].items())
            + f" = {c0['passes_reported']} (counted at `run_graph`: {c0['passes']}). "
            f"`Comparison.seconds` (compare_methods alone) "
            + ", ".join(f"{r['comparison_seconds']:.1f}" for r in runs_c)
            + " s; report writing "
            + ", ".join(f"{r['report_seconds']:.1f}" for r in runs_c)
            + " s.",
            "",
        ]
        if runs_b and "agreement" in data:
            b0 = runs_b[0]
            total_steps = sum(b0["steps"].values())
            lines += [
                "Baseline time by step (first run): "
                + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(b0["steps"].items(), key=lambda kv: -kv[1]))
                + f" (sum {total_steps:.1f} of {b0['wall']:.1f} s wall); σ {b0['sigma_passes_per_r']} passes per r.",
                "",
            ]
            agree = data["agreement"]
            lines += [
                f"**Agreement** (every candidate's values, |compare − baseline| ≤ {TOL:g} · max(1, |value|)): "
                + ("**yes**" if agree["ok"] else "**no**")
                + f" over {agree['n_candidates']} candidates (first runs); largest differences (relative "
                "to max(1, |value|)): "
                + ", ".join(f"{k} {v:.1e}" for k, v in agree["max_rel_diff"].items())
                + f". σ per r differs by {agree['sigma_max_abs_diff']:.1e}. In-sample subspaces: largest "
                f"principal-angle sine {agree['max_subspace_sine']:.1e}"
                + (
                    " (runs before the orthonormality guard also counted mm-sparse's non-orthonormal maps)"
                    if agree["max_subspace_sine"] > 0.5
                    else ""
                )
                + ".",
                "",
            ]
            if agree["same_subspace_other_basis"]:
                rc = agree["rbf_rechecked_on_compare_basis"]
                lines += [
                    f"Same subspace, different basis (the arms' components differ by more than 1e-6, "
                    f"the subspaces agree): {', '.join(agree['same_subspace_other_basis'])}. The RBF MMD² by "
                    "random features depends on the basis, not only on the subspace (a fixed draw of "
                    "features is not rotation invariant), so these candidates' RBF values differ by the "
                    "estimate's noise; "
                    + (
                        f"{len(rc)} of them were off by more than the tolerance and "
                        "were re-evaluated (untimed) on the comparison's basis with `metrics.mmd2_rbf`: "
                        + ("all equal the comparison's value." if all(x["ok"] for x in rc) else "NOT all equal.")
                        + " Own basis vs comparison: "
                        + "; ".join(f"{x['candidate']} {x['baseline_own_basis']:.4g} vs {x['compare']:.4g}" for x in rc)
                        if rc
                        else "none was off by more than the tolerance."
                    ),
                    "",
                ]
            if agree["disagreements"] or agree["missing"]:
                lines += (
                    ["Disagreements:", ""]
                    + [f"* {d}" for d in agree["disagreements"][:40]]
                    + [f"* missing in baseline: {m}" for m in agree["missing"]]
                    + [""]
                )
            # per-method split
            lines += [
                "Per method (summed over grid points and r; first runs): compare's in-sample fit seconds "
                "(`Candidate.seconds`) and passes (`Candidate.passes`, in + out of sample); baseline's "
                "in-sample fit seconds, its whole per-candidate seconds (passes, both fits, scores, RBF, "
                "downstream) and passes.",
                "",
                "| method | candidates | compare fit s | compare passes |"
                " baseline fit s | baseline total s | baseline passes |",
                "|---|---|---|---|---|---|---|",
            ]
            methods = list(dict.fromkeys(c["method"] for c in c0["candidates"]))
            for m in methods:
                cc = [c for c in c0["candidates"] if c["method"] == m]
                bb = [c for c in b0["candidates"] if c["method"] == m]
                lines.append(
                    f"| {m} | {len(cc)} | {sum(c['seconds'] for c in cc):.2f} | {sum(c['passes'] for c in cc)} | "
                    f"{sum(c.get('fit_seconds', 0.0) for c in bb):.2f} | {sum(c['seconds'] for c in bb):.2f} | "
                    f"{sum(c['passes'] for c in bb)} |"
                )
            lines.append("")
        lines += [
            "Runs (in order): "
            + "; ".join(
                f"{r['arm']} {r['wall']:.1f} s (load {r['load_before']}→{r['load_after']})" for r in data["runs"]
            ),
            "",
        ]
    if results.get("notes"):
        lines += ["## Notes", ""] + [f"* {n}" for n in results["notes"]] + [""]
    (folder / "compare.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["credit", "Adult"], choices=list(FRAMES))
    parser.add_argument("--r", type=int, nargs="+", default=None, help="ranks (default: credit 2 3, Adult 2)")
    parser.add_argument("--methods", nargs="+", default=None, help="default: every registered method")
    parser.add_argument(
        "--exclude", nargs="*", default=None, help="methods left out of both arms (default: olfat-sdp on Adult only)"
    )
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument(
        "--repeats",
        type=int,
        nargs="+",
        default=[2, 1],
        help="runs of each arm per dataset (one number per dataset, or one for all)",
    )
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the datasets of results/compare.json; a dataset run again gets its runs appended",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite results/compare.md from results/compare.json (adding --note lines)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="where compare.{md,json} go")
    args = parser.parse_args()
    if args.report_only:
        results = json.loads((args.results / "compare.json").read_text())
        results["notes"] = [*results.get("notes", []), *args.note]
        write_report(results, args.results)
        return

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    results: dict[str, Any] = {
        "command": "OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_compare.py " + " ".join(sys.argv[1:]),
        "commit": commit,
        "provenance": provenance(
            [
                "fairpca_dist/assessment/comparison.py",
                "fairpca_dist/assessment/table_comparison.py",
                "benchmarks/bench_compare.py",
            ]
        ),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": load_avg(),
        "datasets": {},
        "notes": args.note,
    }
    if args.merge and (args.results / "compare.json").is_file():
        old = json.loads((args.results / "compare.json").read_text())
        results["command"] = f"{old['command']}; then {results['command']}"
        results["provenance"] = f"{old['provenance']}; then {results['provenance']}"
        results["started"], results["load_before"] = old["started"], old["load_before"]
        results["datasets"], results["notes"] = old["datasets"], [*old.get("notes", []), *args.note]
    SCRATCH.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="compare-", dir=SCRATCH))
    try:
        for i, name in enumerate(args.datasets):
            repeats = args.repeats[min(i, len(args.repeats) - 1)]
            frame, roles = FRAMES[name]()
            ranks = args.r or DEFAULT_R[name]
            exclude = args.exclude if args.exclude is not None else DEFAULT_EXCLUDE.get(name, [])
            methods = args.methods
            if exclude:
                methods = [m for m in (methods or list(SOLVERS)) if m not in exclude]
            table_dir = work / name
            ingest_table(
                frame,
                table_dir,
                sensitive_feature=[roles["sensitive"]],
                key_columns=[roles["key"]],
                pass_through=[roles["target"]],
            )
            n_features = frame.shape[1] - 3
            data: dict[str, Any] = {
                "description": (
                    f"{len(frame):,} rows x {n_features} features, group `{roles['sensitive']}` "
                    f"({frame[roles['sensitive']].value_counts().to_dict()}), target `{roles['target']}`, "
                    f"key `{roles['key']}`; r = {ranks}; methods: "
                    f"{'every registered method' if methods is None else ', '.join(methods)}"
                    + (f" (left out of both arms: {', '.join(exclude)})" if exclude else "")
                    + f"; {repeats} run(s) of each arm, alternating."
                ),
                "rows": len(frame),
                "features": n_features,
                "ranks": ranks,
                "methods": methods,
                "exclude": exclude,
                "runs": [],
            }
            previous = results["datasets"].get(name)
            if previous is not None:
                if (previous["ranks"], previous["methods"]) != (ranks, methods):
                    raise SystemExit(f"--merge: {name} was run with other ranks or methods")
                data["runs"] = previous["runs"]
                if "agreement" in previous:
                    data["agreement"] = previous["agreement"]
                data["description"] = data["description"].replace(
                    f"{repeats} run(s) of each arm", f"{repeats + len(previous['runs']) // 2} run(s) of each arm"
                )
            results["datasets"][name] = data
            first = len(data["runs"]) // 2
            for rep in range(first, first + repeats):
                run = run_compare(table_dir, ranks, methods, roles["target"], work)
                run["repeat"] = rep
                if rep == first:
                    compare_run = run
                data["runs"].append(run)
                print(f"{name} compare #{rep}: {run['wall']:.1f} s, {run['passes']} passes", flush=True)
                write_report(results, args.results)
                if not args.skip_baseline:
                    run = run_baseline(table_dir, ranks, methods, roles["target"])
                    run["repeat"] = rep
                    data["runs"].append(run)
                    print(f"{name} baseline #{rep}: {run['wall']:.1f} s, {run['passes']} passes", flush=True)
                    data["agreement"] = agreement(compare_run, run, table_dir)
                    print(f"  agreement ok: {data['agreement']['ok']}; {data['agreement']['max_rel_diff']}", flush=True)
                    write_report(results, args.results)
    finally:
        results["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        results["load_after"] = load_avg()
        write_report(results, args.results)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
