"""``mmd`` (MMD-constrained fair PCA, Lee et al. 2022, RBF kernel) at scale: exact vs random features.

    .venv/bin/python benchmarks/bench_mmd_scale.py                          # everything (2-3 h on 2 shared cores)
    .venv/bin/python benchmarks/bench_mmd_scale.py --parts adult            # one part (adult, table, exact, blocks)
    .venv/bin/python benchmarks/bench_mmd_scale.py --smoke                  # tiny sizes, ~3 min

Four parts (spec seed-004.md §2.7, §3.2, §3.4.2); results go to results/<name>.{md,json}
(``--name``, default ``mmd_scale``), rewritten after every part. Every in-memory case runs in
its own subprocess with ``OPENBLAS_NUM_THREADS=1`` (peak memory = that process's
``ru_maxrss``); the load average (1 min) is recorded before and after every case because other
work shares the VM's 2 cores.

1. **adult**: full Adult (``benchmarks/datasets_mmd.load_adult``: 45,222 rows, p = 97, protected
   = sex, every column z-scored with ddof 0), ``fit_projection(moments, d, method="mmd",
   standardize=False, passes=ArrayPasses(...), tau=1e-3, random_state=0)`` for d in ``--adult-d``:
   ``estimator="rff"`` at D in ``--rff-d`` (library caps), ``"exact"`` capped by
   ``--adult-exact-max-iter`` / ``--adult-exact-max-inner`` (a full exact fit takes hours) and
   ``"rff"`` D = 1000 under the same caps (like for like). Per fit: wall time, constraint
   evaluations (``certificate["n_evaluations"]``), every evaluation timed (the passes object is
   wrapped; an exact evaluation is projected pass → kernel blocks → backprojected pass), peak
   RSS, explained variance, the estimator's own MMD² and the exact MMD² of the solution
   (``metrics.mmd2_rbf(..., estimator="exact")`` at the fit's σ), status. The uncapped exact
   time is projected as (evaluations of the uncapped rff fit with the largest D) x (exact evaluation).
2. **table**: ``--rows`` x ``--features`` synthetic Parquet table
   (``datasets.write_synthetic_parquet``, groups g0/g1 at 70/30 %, 500k-row files) on
   ``LocalCluster(2 workers x 1 thread, memory_limit=--worker-memory``, default 8GB):
   ``compute_moments`` (``--repeats`` runs) interleaved with a read-only pass (every slab
   converted to float64 and summed: the Parquet read), and ``TablePasses.rff_sums(V, origin,
   features)`` at d = 2 for D in ``--rff-d`` with ``RandomFeatures`` of both precisions
   (``precision="double"``, and ``"single"``: cos/sin in float32, the solver's ``rff_precision``;
   same Ω, β), ``--repeats`` runs each (``--big-d-repeats`` at D ≥ 1000), double and single
   interleaved at the same V (a new random V every run; the relative error of single's h and
   gradient against double's is recorded): ratio median evaluation / median moments pass against
   the target ≤ 2. Then (step ``fit``) one full ``mmd`` fit with ``estimator="rff"`` (D =
   ``--table-fit-d``, the default single precision), capped by ``--table-max-iter`` / ``--table-max-inner``, and the
   exact MMD² of its solution on a stratified 20k-per-group sample. In a subprocess: (step
   ``profile``) where an rff evaluation spends its time (``kernels.rff_sums`` in both precisions
   and each of its steps on one 32 MB slab of p = 20 rows, plus cheaper variants), and (step
   ``error``) the RFF error vs D (20k in-memory rows of the same generator; D in {100, 300, 1000,
   3000}, 5 feature seeds; PCA, 2 random and the fitted projections; relative error against exact).
3. **exact**: one exact evaluation of the solver's constraint (``mmd._exact_constraint``: projected
   pass + blocks + backprojected pass) on N in ``--exact-n`` synthetic in-memory rows (p = 20,
   d = 2, ``--repeats`` runs), a fit t = a·N²; the evaluations a fit needs, from a full
   ``estimator="sample"`` fit (exact kernel on 2,500 rows per group) on the same data; the largest
   N whose exact fit is predicted to end in ``--exact-budget`` s; that exact fit (aborted at
   1.5 x the budget).

4. **blocks**: the exact evaluation at N = ``--blocks-n`` (p = 20, d = 2 and 10) with kernel blocks
   of ``--block-sizes`` rows (the solver's ``block_rows`` option; default
   ``kernels.DEFAULT_BLOCK_ROWS`` = 256, also used by parts 1 and 3).

Parts can run in separate invocations (``--parts``, ``--name``, ``--results``) and be merged into
one result with ``--merge`` (keep the parts of an existing <name>.json) and ``--combine FILE ...``;
``--table-steps`` (any of passes, fit, profile, error) runs only those table steps: the others
keep the earlier run's results, marked as such (``--table-steps fit --reuse``: the fit on a
kept table, ``--keep``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: the in-memory cases use one core

import argparse
import contextlib
import json
import resource
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS, SCRATCH = HERE / "results", HERE / "scratch"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from fairpca_dist import fit_projection  # noqa: E402
from fairpca_dist.assessment.metrics import mmd2_rbf  # noqa: E402
from fairpca_dist.engine.datapasses import ArrayPasses  # noqa: E402
from fairpca_dist.engine.kernels import DEFAULT_BLOCK_ROWS, RandomFeatures, median_bandwidth  # noqa: E402
from fairpca_dist.engine.moments import GroupMoments  # noqa: E402
from fairpca_dist.solvers.stiefel import random_orthonormal, top_eigenvectors  # noqa: E402

MEASURED = [
    "fairpca_dist/solvers/mmd.py",
    "fairpca_dist/engine/kernels.py",
    "fairpca_dist/engine/datapasses.py",
    "fairpca_dist/engine/passes.py",
]
TARGET_RATIO = 2.0
PRECISIONS = ("double", "single")  # RandomFeatures(precision=...): cos/sin in float64 or float32
TAU = 1e-3
EARLIER = " (kept from an earlier run: see the notes)"


# ------------------------------------------------------------------------------------ helpers
def stats(values) -> dict:
    values = [float(v) for v in values]
    if not values:
        return {"n": 0, "median": float("nan"), "min": float("nan"), "max": float("nan"), "sum": 0.0}
    return {
        "n": len(values),
        "median": float(np.median(values)),
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "sum": float(np.sum(values)),
        "all": values if len(values) <= 12 else None,
    }


def fmt(s: dict, digits: int = 2) -> str:
    if not s or not s.get("n"):
        return "–"
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}–{s['max']:.{digits}f}]"


def load() -> float:
    return float(os.getloadavg()[0])


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Deadline(Exception):
    """Raised by TimedPasses when a fit runs past its wall-time limit."""


class TimedPasses:
    """A DataPasses wrapper that times every pass; an exact evaluation is the time from the
    start of ``projected`` to the end of the following ``backprojected`` (the kernel blocks run
    on the driver in between); an rff evaluation is one ``rff_sums`` pass."""

    def __init__(self, inner, log: dict | None = None, deadline: float | None = None):
        self.inner, self.groups, self.deadline = inner, inner.groups, deadline
        self.log = log if log is not None else {"projected": [], "backprojected": [], "rff_sums": [], "evaluation": []}
        self._started: float | None = None

    def _check(self) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise Deadline

    def rescaled(self, scale):
        return TimedPasses(self.inner.rescaled(scale), self.log, self.deadline)

    def sample(self, max_rows_per_group, seed):
        return self.inner.sample(max_rows_per_group, seed)

    def l1_sums(self, components, centers):
        return self.inner.l1_sums(components, centers)

    def projected(self, components, origin):
        self._check()
        started = time.perf_counter()
        out = self.inner.projected(components, origin)
        self.log["projected"].append(time.perf_counter() - started)
        self._started = started
        return out

    def backprojected(self, s, origin):
        started = time.perf_counter()
        out = self.inner.backprojected(s, origin)
        now = time.perf_counter()
        self.log["backprojected"].append(now - started)
        if self._started is not None:
            self.log["evaluation"].append(now - self._started)
            self._started = None
        return out

    def rff_sums(self, components, origin, features):
        self._check()
        started = time.perf_counter()
        out = self.inner.rff_sums(components, origin, features)
        self.log["rff_sums"].append(time.perf_counter() - started)
        self.log["evaluation"].append(self.log["rff_sums"][-1])
        return out


def run_case(case: dict, timeout: float | None = None) -> dict:
    """Run one case in a fresh interpreter (1 BLAS thread); its JSON result, with the load
    average before and after."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    before, started = load(), time.perf_counter()
    print(f"  case {json.dumps({k: v for k, v in case.items() if k != 'components'})} ...", flush=True)
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--case", json.dumps(case)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return {"case": case, "error": f"timeout after {timeout} s", "load_before": before, "load_after": load()}
    out = next((line[7:] for line in reversed(done.stdout.splitlines()) if line.startswith("RESULT ")), None)
    if out is None:
        return {
            "case": case,
            "error": (done.stderr or done.stdout)[-3000:],
            "load_before": before,
            "load_after": load(),
        }
    result = json.loads(out)
    result.update(case=case, load_before=before, load_after=load(), process_seconds=time.perf_counter() - started)
    print("    " + summary(result), flush=True)
    return result


def summary(r: dict) -> str:
    keys = ("seconds", "n_evaluations", "status", "explained_variance", "mmd2_exact", "peak_rss_mb")
    parts = [f"{k}={r[k]:.4g}" if isinstance(r.get(k), float) else f"{k}={r.get(k)}" for k in keys if k in r]
    if "evaluation" in r:
        parts.append(f"eval={fmt(r['evaluation'], 3)} s")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------ data
def adult_data(d_unused: int = 0):
    from datasets_mmd import load_adult

    features, _, protected, names = load_adult()
    x = features.to_numpy(dtype=np.float64)
    std = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    labels = np.where(protected == 1, "male", "female")
    return x, labels, names


def synthetic_data(n: int, p: int, seed: int = 0):
    from fairpca_dist.io.datasets import synthetic_group_table

    frame = synthetic_group_table(n, n_features=p, seed=seed)
    names = [f"f{j}" for j in range(p)]
    return frame[names].to_numpy(dtype=np.float64), frame["group"].to_numpy(), names


def memory_data(case: dict):
    if case["data"] == "adult":
        return adult_data()
    return synthetic_data(case["n"], case.get("p", 20), case.get("seed", 0))


# ------------------------------------------------------------------------------------ cases (subprocess)
def case_fit(case: dict) -> dict:
    """One full (or capped) mmd fit on in-memory rows."""
    x, labels, names = memory_data(case)
    moments = GroupMoments.from_arrays(x, labels, feature_names=names)
    passes = ArrayPasses(x, labels, moments.groups)
    rss_data = peak_rss_mb()
    options = {"tau": case.get("tau", TAU), "estimator": case["estimator"]}
    for key in ("max_iter", "max_inner", "sample_rows", "start"):
        if case.get(key) is not None:
            options[key] = case[key]
    if case["estimator"] == "rff":
        options["n_random_features"] = case["D"]
    deadline = case.get("deadline_s")
    timed = TimedPasses(passes, deadline=None if deadline is None else time.perf_counter() + deadline)
    started = time.perf_counter()
    out: dict = {
        "rows": int(x.shape[0]),
        "features": int(x.shape[1]),
        "group_counts": {str(g): int(c) for g, c in zip(moments.groups, moments.count, strict=True)},
        "rss_after_data_mb": rss_data,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = fit_projection(
                moments,
                case["d"],
                method="mmd",
                standardize=False,
                passes=timed,
                random_state=case.get("seed", 0),
                **options,
            )
        except Deadline:
            model = None
    out["seconds"] = time.perf_counter() - started
    out["peak_rss_mb"] = peak_rss_mb()
    log = timed.log
    out["evaluation"] = stats(log["evaluation"])
    out["evaluations_timed"] = len(log["evaluation"])
    for key in ("projected", "backprojected"):
        if log[key]:
            out[key] = stats(log[key])
    if case["estimator"] != "rff" and log["evaluation"]:
        blocks = [e - a - b for e, a, b in zip(log["evaluation"], log["projected"], log["backprojected"], strict=True)]
        out["blocks"] = stats(blocks)
    out["seconds_in_evaluations"] = float(np.sum(log["evaluation"]))
    out["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught})
    if model is None:
        out["status"] = "aborted_at_deadline"
        out["n_evaluations"] = len(log["evaluation"])
        return out
    cert = model.certificate
    out.update(
        status=str(model.status),
        n_evaluations=int(cert["n_evaluations"]),
        n_iter=int(model.n_iter),
        explained_variance=float(cert["explained_variance"]),
        mmd2_estimator=float(cert["mmd2"]),
        sigma=float(cert["sigma"]),
        null_bias_floor=float(cert["null_bias_floor"]),
        rho=float(cert["rho"]),
        inner_steps=[int(i) for i in model.details["log"]["inner"]],
        mmd2_per_outer=[float(v) for v in model.details["log"]["mmd2"]],
    )
    components = np.asarray(model.components, dtype=np.float64)
    if components.shape[0] != x.shape[1]:
        components = components.T
    out["components"] = components.tolist() if components.size <= 400 else None
    if case.get("exact_metric", True):
        t0 = time.perf_counter()
        out["mmd2_exact"] = float(mmd2_rbf(moments, passes, components, cert["sigma"], estimator="exact")[0, 1])
        out["mmd2_exact_seconds"] = time.perf_counter() - t0
        out["meets_tau_exact"] = out["mmd2_exact"] <= options["tau"]
    out["peak_rss_mb_with_metric"] = peak_rss_mb()
    return out


def case_exact_eval(case: dict) -> dict:
    """Time the solver's exact constraint (projected pass, blocks, backprojected pass)."""
    from fairpca_dist.solvers.mmd import _exact_constraint

    x, labels, names = memory_data(case)
    moments = GroupMoments.from_arrays(x, labels, feature_names=names)
    passes = ArrayPasses(x, labels, moments.groups)
    _, pca = top_eigenvectors(moments.total_covariance(), case["d"])
    sampled = passes.sample(2000, 0)
    sigma = median_bandwidth(sampled.projected(pca, moments.global_mean)[0])
    timed = TimedPasses(passes)
    evaluate = _exact_constraint(
        timed, moments.global_mean, [(0, 1)], sigma, case.get("block_rows", DEFAULT_BLOCK_ROWS)
    )
    rng = np.random.default_rng(1)
    values = []
    for _ in range(case["repeats"] if case["n"] < 100_000 else 1):  # N ≥ 100k: one run (~1-8 min each)
        values.append(float(evaluate(random_orthonormal(rng, x.shape[1], case["d"]))[0][0]))
    log = timed.log
    blocks = [e - a - b for e, a, b in zip(log["evaluation"], log["projected"], log["backprojected"], strict=True)]
    return {
        "rows": int(x.shape[0]),
        "evaluation": stats(log["evaluation"]),
        "projected": stats(log["projected"]),
        "backprojected": stats(log["backprojected"]),
        "blocks": stats(blocks),
        "sigma": sigma,
        "peak_rss_mb": peak_rss_mb(),
        "values": values,
    }


def case_rff_profile(case: dict) -> dict:
    """kernels.rff_sums on one slab (the passes' 32 MB of float64 rows) in double and single
    precision, each of its steps on the whole slab, and variants."""
    from fairpca_dist.engine.kernels import rff_sums

    p, d = case.get("p", 20), 2
    n = 32 * 2**20 // (8 * p)
    x, labels, _ = synthetic_data(n, p)
    z = x - x.mean(axis=0)
    codes = (labels == "g1").astype(np.int64)
    k = 2
    rng = np.random.default_rng(0)
    v = random_orthonormal(rng, p, d)
    out: dict = {"rows": n, "features": p, "d": d, "by_D": {}, "accuracy_of": "precision='single' vs double"}

    def best(function):
        times = []
        for _ in range(3 if D < 1000 else 1):  # best of 3 (1 at D >= 1000: a slab then takes ~10-30 s)
            t0 = time.perf_counter()
            value = function()
            times.append(time.perf_counter() - t0)
        return value, float(np.min(times))

    for D in case["Ds"]:
        f = RandomFeatures.draw(d, D, 3.0, rng)
        single = RandomFeatures(f.frequencies, f.phases, "single")
        steps = {}
        sums_double, steps["library rff_sums (per group, blocks of kernels.rff_block_rows(D) rows)"] = best(
            lambda f=f: rff_sums(z, codes, k, v, f)
        )
        sums_single, steps["library rff_sums, precision='single'"] = best(
            lambda single=single: rff_sums(z, codes, k, v, single)
        )
        # the steps of one evaluation on the whole slab (the library runs them block by block)
        u = z @ v
        angle, steps["angle = [zV, 1][Ω; β]"] = best(
            lambda u=u, f=f: np.hstack([u, np.ones((n, 1))]) @ np.vstack([f.frequencies, f.phases])
        )
        cos, steps["cos(angle), float64"] = best(lambda angle=angle: np.cos(angle))
        sin, steps["sin(angle), float64"] = best(lambda angle=angle: np.sin(angle))
        turns = angle / (2 * np.pi)
        reduced, steps["range reduction to float32 (turns − rint(turns))·2π"] = best(
            lambda turns=turns: (turns - np.rint(turns)).astype(np.float32) * np.float32(2 * np.pi)
        )
        _, steps["cos+sin, float32"] = best(lambda reduced=reduced: (np.cos(reduced), np.sin(reduced)))
        groups = [codes == g for g in range(k)]
        _, steps["Σ_g z_gᵀ sin_g (one p × D GEMM per group)"] = best(
            lambda sin=sin, groups=groups: [z[m].T @ sin[m] for m in groups]
        )
        _, steps["Σ_g 1ᵀ cos_g"] = best(lambda cos=cos, groups=groups: [cos[m].sum(axis=0) for m in groups])
        variants = {}
        if D < 1000:
            _, variants["exp(1j·angle) (cos and sin at once, float64)"] = best(lambda angle=angle: np.exp(1j * angle))
        sin32, z32 = sin.astype(np.float32), z.astype(np.float32)
        _, variants["z.T @ sin in float32 (one GEMM)"] = best(lambda z32=z32, sin32=sin32: z32.T @ sin32)
        _, variants["z.T @ sin in float64 (one GEMM)"] = best(lambda sin=sin: z.T @ sin)
        from fairpca_dist.engine.kernels import pairwise_rff

        h_lib, g_lib = pairwise_rff(sums_double, [(0, 1)], f)
        h_one, g_one = pairwise_rff(sums_single, [(0, 1)], single)
        accuracy = {
            "relative_error_h": float(abs(h_one[0] - h_lib[0]) / abs(h_lib[0])),
            "relative_error_gradient": float(np.linalg.norm(g_one - g_lib) / np.linalg.norm(g_lib)),
        }
        out["by_D"][str(D)] = {"steps": steps, "variants": variants, "accuracy": accuracy}
    return out


def case_rff_error(case: dict) -> dict:
    """RFF MMD² vs exact on n in-memory rows at several projections, D in Ds, several seeds."""
    x, labels, names = memory_data(case)
    moments = GroupMoments.from_arrays(x, labels, feature_names=names)
    passes = ArrayPasses(x, labels, moments.groups)
    d = case["d"]
    _, pca = top_eigenvectors(moments.total_covariance(), d)
    sigma = case.get("sigma") or median_bandwidth(passes.sample(2000, 0).projected(pca, moments.global_mean)[0])
    rng = np.random.default_rng(7)
    projections = {
        "pca": pca,
        "random 1": random_orthonormal(rng, x.shape[1], d),
        "random 2": random_orthonormal(rng, x.shape[1], d),
    }
    if case.get("components") is not None:
        projections["table rff fit"] = np.asarray(case["components"])
    rows = []
    for name, v in projections.items():
        t0 = time.perf_counter()
        exact = float(mmd2_rbf(moments, passes, v, sigma, estimator="exact")[0, 1])
        exact_s = time.perf_counter() - t0
        for D in case["Ds"]:
            estimates = []
            t0 = time.perf_counter()
            for seed in range(case["seeds"]):
                estimates.append(
                    float(
                        mmd2_rbf(moments, passes, v, sigma, estimator="rff", n_random_features=D, random_state=seed)[
                            0, 1
                        ]
                    )
                )
            e = np.asarray(estimates)
            rows.append(
                {
                    "projection": name,
                    "D": D,
                    "exact": exact,
                    "exact_seconds": exact_s,
                    "rff_mean": float(e.mean()),
                    "rff_sd": float(e.std(ddof=1)),
                    "rms_error": float(np.sqrt(np.mean((e - exact) ** 2))),
                    "rms_relative_error": float(np.sqrt(np.mean((e - exact) ** 2)) / exact),
                    "seconds_per_estimate": (time.perf_counter() - t0) / case["seeds"],
                }
            )
    return {"rows": int(x.shape[0]), "sigma": float(sigma), "errors": rows, "peak_rss_mb": peak_rss_mb()}


CASES = {"fit": case_fit, "exact_eval": case_exact_eval, "rff_profile": case_rff_profile, "rff_error": case_rff_error}


# ------------------------------------------------------------------------------------ parts (driver)
def adult_cases(args) -> list[dict]:
    """The Adult fits, most important first (the extra D=300 fit last: ``--adult-extra``)."""
    base = {"kind": "fit", "data": "adult"}
    exact_cap = {"max_iter": args.adult_exact_max_iter, "max_inner": args.adult_exact_max_inner}
    small_cap = {"max_iter": 1, "max_inner": args.adult_d10_exact_max_inner}
    cases = [
        {**base, "d": 2, "estimator": "exact", **exact_cap, "deadline_s": args.adult_exact_deadline},
        {**base, "d": 2, "estimator": "rff", "D": 1000, **exact_cap},
        *({**base, "d": 2, "estimator": "rff", "D": D} for D in args.adult_rff_d),
    ]
    if 10 in args.adult_d:
        cases += [
            {**base, "d": 10, "estimator": "rff", "D": 100},
            {**base, "d": 10, "estimator": "exact", **small_cap, "deadline_s": args.adult_exact_deadline},
        ]
    cases += [{**base, "d": 2, "estimator": "rff", "D": D} for D in args.adult_extra]
    return cases


def part_adult(args, result: dict) -> None:
    out = result.setdefault("adult", {"fits": []})
    out["fits"] = []
    for case in adult_cases(args):
        if args.smoke:
            case.update(max_iter=1, max_inner=2)
        out["fits"].append(run_case(case, timeout=args.case_timeout))
        project_exact(result)
        write(result, args)


def _chunk_read(chunk, repeat: int) -> float:
    """A read-only pass: every slab of the partition converted to float64 rows and summed."""
    total = 0.0
    for start, stop in chunk.slabs(32 * 2**20):
        total += float(chunk.rows(start, stop).sum())
    return total


def synthetic_table(folder: Path, n: int, p: int, rows_per_file: int, *, reuse: bool) -> dict:
    """The n × p synthetic Parquet table (``datasets.write_synthetic_parquet``, seed 0) in
    ``folder``, written unless ``reuse`` finds it there: its files, size and writing time."""
    from disk import require_free_disk

    from fairpca_dist.io.datasets import write_synthetic_parquet

    require_free_disk(SCRATCH, max(5e9, 3 * n * (p + 2) * 8), f"{n:,} x {p}")
    out = {}
    if not (reuse and folder.is_dir()):
        shutil.rmtree(folder, ignore_errors=True)
        print(f"writing {n:,} x {p} to {folder} ...", flush=True)
        started = time.perf_counter()
        write_synthetic_parquet(folder, n, n_features=p, rows_per_file=rows_per_file, seed=0)
        out["write_seconds"] = time.perf_counter() - started
    files = sorted(folder.glob("part-*.parquet"))
    return {**out, "files": len(files), "disk_gb": sum(f.stat().st_size for f in files) / 1e9}


@contextlib.contextmanager
def two_workers(memory_limit: str) -> Iterator:
    """A client of ``LocalCluster(2 workers × 1 thread, memory_limit)``, no dashboard."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=memory_limit, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        yield client


def table_on_cluster(args, result: dict, out: dict, steps: list[str]) -> None:
    """The table steps that need the Parquet table and the cluster: passes and fit."""
    from fairpca_dist import compute_moments
    from fairpca_dist.engine.kernels import pairwise_rff
    from fairpca_dist.engine.passes import run_graph, table_passes

    n, p = args.rows, args.features
    timed_passes = "passes" in steps
    if timed_passes:
        out.update(rows=n, features=p, rows_per_file=args.rows_per_file, load_start=load())
    out.update(check_rows_per_group=args.check_rows)
    folder = SCRATCH / "mmd_parquet"
    out.update(synthetic_table(folder, n, p, args.rows_per_file, reuse=args.reuse))
    features = [f"f{j}" for j in range(p)]
    try:
        with two_workers(args.worker_memory) as client:
            out["worker_memory_limit"] = args.worker_memory
            times, read_times, moments = [], [], None
            out["load_before_moments"] = load()
            passes = None
            if not timed_passes:  # a later run (--table-steps fit,...): the moments once, for the fit
                moments = compute_moments(str(folder), sensitive_feature="group", features=features, client=client)
                passes = table_passes(str(folder), moments, sensitive_feature="group", client=client)
            for i in range(
                args.repeats if timed_passes else 0
            ):  # interleaved with read-only passes: no repeated graph back to back
                t0 = time.perf_counter()
                moments = compute_moments(str(folder), sensitive_feature="group", features=features, client=client)
                times.append(time.perf_counter() - t0)
                print(f"moments pass {i + 1}: {times[-1]:.2f} s", flush=True)
                if passes is None:
                    passes = table_passes(str(folder), moments, sensitive_feature="group", client=client)
                t0 = time.perf_counter()
                run_graph(passes.table.map_chunks(_chunk_read, i), client=client)
                read_times.append(time.perf_counter() - t0)
            if timed_passes:
                out["moments_pass_seconds"] = stats(times)
            out["group_counts"] = {str(g): int(c) for g, c in zip(moments.groups, moments.count, strict=True)}
            base = out["moments_pass_seconds"]["median"]
            if timed_passes:
                out["read_pass_seconds"] = stats(read_times)
                out["read_ratio"] = out["read_pass_seconds"]["median"] / base
                print(f"read-only pass: {fmt(out['read_pass_seconds'])} s", flush=True)
                out["rff_pass"] = {}
            rng = np.random.default_rng(0)
            v = random_orthonormal(rng, p, 2)
            sigma = 3.0  # the pass's cost does not depend on σ
            for D in args.rff_d if timed_passes else []:
                # double and single precision interleaved, both at the same V (a new random V every
                # repeat: identical graph keys may be served from the cluster's memory, seen: 0.02 s)
                double = RandomFeatures.draw(2, D, sigma, rng)
                both = {"double": double, "single": RandomFeatures(double.frequencies, double.phases, "single")}
                times = {precision: [] for precision in PRECISIONS}
                errors_h, errors_g, before = [], [], load()
                for _ in range(args.repeats if D < 1000 else args.big_d_repeats):
                    v = random_orthonormal(rng, p, 2)
                    sums = {}
                    for precision in PRECISIONS:
                        t0 = time.perf_counter()
                        sums[precision] = passes.rff_sums(v, moments.global_mean, both[precision])
                        times[precision].append(time.perf_counter() - t0)
                    (h_d, g_d), (h_s, g_s) = (pairwise_rff(sums[q], [(0, 1)], both[q]) for q in PRECISIONS)
                    errors_h.append(float(abs(h_s[0] - h_d[0]) / abs(h_d[0])))
                    errors_g.append(float(np.linalg.norm(g_s - g_d) / np.linalg.norm(g_d)))
                row = out["rff_pass"][str(D)] = {
                    "load_before": before,
                    "load_after": load(),
                    "single_relative_error_h": max(errors_h),
                    "single_relative_error_gradient": max(errors_g),
                }
                for precision in PRECISIONS:
                    s = stats(times[precision])
                    row[precision] = {
                        "seconds": s,
                        "ratio": s["median"] / base,
                        "meets_target": s["median"] / base <= TARGET_RATIO,
                    }
                    print(f"rff_sums D={D} {precision}: {fmt(s)} s, ratio {s['median'] / base:.2f}", flush=True)
                write(result, args)
            if "fit" in steps:
                fit_on_table(args, result, out, passes, moments, base)
            try:
                out["worker_peak_rss_mb"] = {str(k): v for k, v in client.run(peak_rss_mb).items()}
            except Exception as error:  # noqa: BLE001
                out["worker_peak_rss_mb"] = repr(error)
            write(result, args)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    out["load_end"] = load()


def part_table(args, result: dict) -> None:
    p = args.features
    out = result.setdefault("table", {})
    steps = args.table_steps.split(",")
    if "passes" in steps or "fit" in steps:
        table_on_cluster(args, result, out, steps)
    if "profile" in steps:
        out["profile"] = run_case(
            {"kind": "rff_profile", "p": p, "Ds": args.profile_d or args.rff_d}, timeout=args.case_timeout
        )
        write(result, args)
    if "error" in steps:
        components = out.get("fit", {}).get("components")
        out["rff_error"] = run_case(
            {
                "kind": "rff_error",
                "data": "synthetic",
                "n": args.error_rows,
                "p": p,
                "d": 2,
                "Ds": args.error_d,
                "seeds": args.error_seeds,
                "components": components,
                "sigma": out.get("fit", {}).get("sigma"),
            },
            timeout=args.case_timeout,
        )
        write(result, args)


def fit_on_table(args, result: dict, out: dict, passes, moments, base: float) -> None:
    """One full ``mmd`` fit with ``estimator="rff"`` (the default precision, single) on the table,
    capped, and the exact MMD² of its solution on a stratified sample; ``rff_solve="full"``: one pass per
    evaluation, as before the sample path (``bench_mmd_sample.py``)."""
    p, features = args.features, [f"f{j}" for j in range(args.features)]
    D = args.table_fit_d
    per_eval = out.get("rff_pass", {}).get(str(D), {}).get("single", {}).get("seconds", {}).get("median", 10.0)
    if args.table_max_iter == 0:  # auto: about --table-fit-budget seconds of evaluations
        evaluations = args.table_fit_budget / per_eval
        args.table_max_iter = max(1, int(evaluations / (1.25 * args.table_max_inner)) - 2)
    log = {"projected": [], "backprojected": [], "rff_sums": [], "evaluation": []}
    timed = TimedPasses(passes, log, deadline=time.perf_counter() + args.table_fit_deadline)
    fit = {"D": D, "max_iter": args.table_max_iter, "max_inner": args.table_max_inner, "load_before": load()}
    print(f"table mmd fit rff D={D} max_iter={args.table_max_iter} max_inner={args.table_max_inner} ...", flush=True)
    t0 = time.perf_counter()
    model = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = fit_projection(
                moments,
                2,
                method="mmd",
                standardize=False,
                passes=timed,
                tau=TAU,
                estimator="rff",
                rff_solve="full",  # every evaluation a pass (bench_mmd_sample.py: the sample path)
                n_random_features=D,
                max_iter=args.table_max_iter,
                max_inner=args.table_max_inner,
                random_state=0,
            )
        except Deadline:
            pass
    fit.update(
        seconds=time.perf_counter() - t0,
        load_after=load(),
        evaluation=stats(log["evaluation"]),
        seconds_in_evaluations=float(np.sum(log["evaluation"])),
        warnings=sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught}),
    )
    fit["driver_seconds"] = fit["seconds"] - fit["seconds_in_evaluations"]
    fit["ratio_eval_to_moments"] = fit["evaluation"]["median"] / base
    if model is None:
        fit.update(status="aborted_at_deadline", n_evaluations=len(log["evaluation"]))
    else:
        cert = model.certificate
        components = np.asarray(model.components, dtype=np.float64)
        if components.shape[0] != p:
            components = components.T
        fit.update(
            status=str(model.status),
            n_evaluations=int(cert["n_evaluations"]),
            n_iter=int(model.n_iter),
            explained_variance=float(cert["explained_variance"]),
            mmd2_rff=float(cert["mmd2"]),
            sigma=float(cert["sigma"]),
            null_bias_floor=float(cert["null_bias_floor"]),
            inner_steps=[int(i) for i in model.details["log"]["inner"]],
            mmd2_per_outer=[float(x) for x in model.details["log"]["mmd2"]],
            components=components.tolist(),
        )
        t0 = time.perf_counter()
        sample = passes.sample(args.check_rows, 1)
        smom = GroupMoments.from_codes(sample.x, sample.codes, moments.groups, feature_names=features)
        # the metric takes the full table's origin: the kernel is translation invariant
        fit["mmd2_exact_on_sample"] = float(mmd2_rbf(smom, sample, components, cert["sigma"])[0, 1])
        fit["mmd2_exact_pca_on_sample"] = float(
            mmd2_rbf(smom, sample, top_eigenvectors(moments.total_covariance(), 2)[1], cert["sigma"])[0, 1]
        )
        fit["check_seconds"] = time.perf_counter() - t0
    out["fit"] = fit
    print(
        f"  {fit['seconds']:.0f} s, {fit['n_evaluations']} evaluations, {fit['status']}, "
        f"eval {fmt(fit['evaluation'])} s",
        flush=True,
    )
    write(result, args)


def part_exact(args, result: dict) -> None:
    out = result.setdefault("exact", {})
    p = args.features
    out["evals"] = []
    for n in args.exact_n:
        out["evals"].append(
            run_case(
                {"kind": "exact_eval", "data": "synthetic", "n": n, "p": p, "d": 2, "repeats": args.repeats},
                timeout=args.case_timeout,
            )
        )
        write(result, args)
    ok = [e for e in out["evals"] if "evaluation" in e]
    ns = np.array([e["rows"] for e in ok], dtype=float)
    ts = np.array([e["evaluation"]["median"] for e in ok])
    a = float(np.sum(ts * ns**2) / np.sum(ns**4))  # least squares t = a N²
    out["fit_a"] = a
    out["fit_relative_residuals"] = [float((a * n**2 - t) / t) for n, t in zip(ns, ts, strict=True)]
    # how many evaluations a fit needs: a 'sample' fit (exact kernel, 2,500 rows per group)
    probe_n = args.exact_probe_n
    probe = run_case(
        {
            "kind": "fit",
            "data": "synthetic",
            "n": probe_n,
            "p": p,
            "d": 2,
            "estimator": "sample",
            "sample_rows": 2500,
            "exact_metric": False,
            **({"max_iter": 1, "max_inner": 3} if args.smoke else {}),
        },
        timeout=args.case_timeout,
    )
    out["probe"] = probe
    evaluations = max(int(probe.get("n_evaluations", 0)), 1)
    n_star = int(np.sqrt(args.exact_budget / (evaluations * a)))
    n_star = max(1000, (n_star // 1000) * 1000)
    out["predicted"] = {"evaluations": evaluations, "n": n_star, "seconds": evaluations * a * n_star**2}
    print(f"exact fit: {evaluations} evaluations predicted, largest N in {args.exact_budget} s ≈ {n_star}", flush=True)
    case = {
        "kind": "fit",
        "data": "synthetic",
        "n": n_star,
        "p": p,
        "d": 2,
        "estimator": "exact",
        "deadline_s": 1.5 * args.exact_budget,
    }
    if args.smoke:
        case.update(max_iter=1, max_inner=3)
    out["fit"] = run_case(case, timeout=args.case_timeout)
    write(result, args)


def part_blocks(args, result: dict) -> None:
    """The exact evaluation's kernel-block size (the solver's ``block_rows`` option, default
    ``kernels.DEFAULT_BLOCK_ROWS``): N = ``--blocks-n`` synthetic rows, p = 20, d = 2 and 10."""
    out = result.setdefault("blocks", {"evals": []})
    for d in (2, 10):
        for b in args.block_sizes:
            out["evals"].append(
                run_case(
                    {
                        "kind": "exact_eval",
                        "data": "synthetic",
                        "n": args.blocks_n,
                        "p": args.features,
                        "d": d,
                        "repeats": args.repeats,
                        "block_rows": b,
                    },
                    timeout=args.case_timeout,
                )
            )
            write(result, args)


# ------------------------------------------------------------------------------------ report
def _ratios(t: dict) -> list[dict]:
    """One rff evaluation pass / one moments pass of the same table, per D and precision (run_all.py)."""
    if "moments_pass_seconds" not in t:
        return []
    return [
        {
            "area": "row-reading passes",
            "case": f"mmd rff evaluation pass, D = {D}, {precision}, "
            f"{t['rows']:,} x {t['features']} Parquet (target ≤ {TARGET_RATIO:g})",
            "ours_seconds": r[precision]["seconds"]["median"],
            "baseline": "one `compute_moments` pass of the table",
            "baseline_seconds": t["moments_pass_seconds"]["median"],
            "ratio": r[precision]["ratio"],
        }
        for D, r in t.get("rff_pass", {}).items()
        for precision in PRECISIONS
    ]


def write(result: dict, args) -> None:
    args.results.mkdir(parents=True, exist_ok=True)
    result["load_now"] = load()
    result["ratios"] = _ratios(result.get("table") or {})
    (args.results / f"{args.name}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    lines = [
        "# mmd at scale: exact RBF kernel blocks vs random Fourier features",
        "",
        f"`.venv/bin/python {result['command']}` ({result['provenance']}). 2 cores shared "
        "with other work: load average (1 min) recorded before/after every case. "
        "In-memory cases in a subprocess each, 1 BLAS thread; peak memory = the subprocess's ru_maxrss "
        "(data included; `rss data` = after loading the data). Times: median [min–max] over the repeats "
        f"or over every evaluation of a fit. τ = {TAU:g} throughout; `random_state=0`.",
        "",
    ]
    lines += [f"Note: {note}" for note in result.get("notes", [])] + ([""] if result.get("notes") else [])
    lines += _adult_md(result.get("adult"))
    lines += _table_md(result.get("table"))
    lines += _exact_md(result.get("exact"))
    lines += _blocks_md(result.get("blocks"))
    (args.results / f"{args.name}.md").write_text("\n".join(lines) + "\n")


def _fit_row(f: dict) -> str:
    c = f.get("case", {})
    if "error" in f:
        return f"| {c.get('d')} | {c.get('estimator')} D={c.get('D', '')} | library | {f['error'][:300]} |" + " |" * 9
    cap = "library" if c.get("max_iter") is None else f"max_iter {c['max_iter']}, max_inner {c['max_inner']}"
    est = c["estimator"] + (f" D={c['D']}" if c["estimator"] == "rff" else "")
    return (
        f"| {c['d']} | {est} | {cap} | {f['seconds']:.1f} | {f['n_evaluations']} | {fmt(f['evaluation'], 3)} | "
        f"{f['seconds_in_evaluations'] / max(f['seconds'], 1e-9):.0%} | "
        f"{f['peak_rss_mb']:.0f} ({f['rss_after_data_mb']:.0f}) | "
        f"{f.get('explained_variance', float('nan')):.4f} | {f.get('mmd2_estimator', float('nan')):.3g} | "
        f"{f.get('mmd2_exact', float('nan')):.3g} | {f['status']} | {f['load_before']:.2f}→{f['load_after']:.2f} |"
    )


def _adult_md(a: dict | None) -> list[str]:
    if not a:
        return []
    lines = [
        "## 1. Full Adult (45,222 rows x 97, sex; in memory, `ArrayPasses`)",
        "",
        'Each row is one fit. "evals": constraint evaluations (`certificate[\'n_evaluations\']`); "s/eval": every '
        'evaluation timed (exact = projected pass + kernel blocks + backprojected pass); "in evals": share of the '
        'wall time spent in evaluations; "MMD² est": the fit\'s own estimate at its solution; "MMD² exact": '
        "`metrics.mmd2_rbf(..., estimator='exact')` at the fit's σ.",
        "",
        "| d | estimator | cap | wall s | evals | s/eval | in evals | peak MB (rss data) | expl. var | MMD² est | "
        "MMD² exact | status | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_fit_row(f) for f in a["fits"]]
    lines.append("")
    for f in a["fits"]:
        if "error" in f:
            continue
        c = f["case"]
        extra = ""
        if c["estimator"] == "exact" and "blocks" in f:
            extra = (
                f" exact split per evaluation: projected {fmt(f['projected'], 3)} s, blocks {fmt(f['blocks'], 3)} s, "
                f"backprojected {fmt(f['backprojected'], 3)} s."
            )
        lines.append(
            f"- d={c['d']} {c['estimator']} {c.get('D', '')} (cap {c.get('max_iter')}/{c.get('max_inner')}): "
            f"σ {f.get('sigma', float('nan')):.4g}, null-bias floor {f.get('null_bias_floor', float('nan')):.2g}, "
            f"inner steps per outer {f.get('inner_steps')}, "
            f"exact metric {f.get('mmd2_exact_seconds', float('nan')):.1f} s."
            + extra
            + (f" Warnings: {'; '.join(f['warnings'])}" if f.get("warnings") else "")
        )
    proj = a.get("projection")
    if proj:
        lines += ["", proj]
    return lines + [""]


def _table_md(t: dict | None) -> list[str]:
    if not t or "moments_pass_seconds" not in t:
        return []
    base = t["moments_pass_seconds"]["median"]
    lines = [
        f"## 2. {t['rows']:,}-row x {t['features']} synthetic Parquet table, LocalCluster(2 x 1 thread)",
        "",
        f"{t['files']} files, {t['disk_gb']:.2f} GB, written in {t['write_seconds']:.0f} s; groups "
        f"{t['group_counts']}. Load {t['load_start']:.2f} at the start, {t.get('load_end', float('nan')):.2f} "
        f"after the cluster part. Target: one rff evaluation ≤ {TARGET_RATIO:g} x one moments pass.",
        "",
        "| pass | s | M rows/s | / moments pass | meets ≤ 2x | load |",
        "|---|---|---|---|---|---|",
        f"| `compute_moments` | {fmt(t['moments_pass_seconds'])} | {t['rows'] / base / 1e6:.2f} | 1 | | |",
        f"| read only (slabs → float64, summed) | {fmt(t['read_pass_seconds'])} | "
        f"{t['rows'] / t['read_pass_seconds']['median'] / 1e6:.2f} | {t['read_ratio']:.2f} | | |",
    ]
    for D, r in t.get("rff_pass", {}).items():
        for precision in PRECISIONS:
            q = r[precision]
            lines.append(
                f"| `TablePasses.rff_sums` D={D}, d=2, precision={precision!r} | {fmt(q['seconds'])} | "
                f"{t['rows'] / q['seconds']['median'] / 1e6:.2f} | {q['ratio']:.2f} | "
                f"{'yes' if q['meets_target'] else 'no'} | {r['load_before']:.2f}→{r['load_after']:.2f} |"
            )
    met = [(int(D), q) for D, r in t.get("rff_pass", {}).items() for q in PRECISIONS if r[q]["meets_target"]]
    lines += [
        "",
        "Meets ≤ 2x: "
        + (", ".join(f"D={D} {q}" for D, q in met) + f"; largest D: {max(D for D, _ in met)}" if met else "none")
        + ". Single vs double at the same V (every repeat, largest): "
        "relative error of h / of its gradient "
        + ", ".join(
            f"D={D} {r['single_relative_error_h']:.1e} / {r['single_relative_error_gradient']:.1e}"
            for D, r in t.get("rff_pass", {}).items()
        )
        + ".",
        "",
        f"Workers: memory_limit {t.get('worker_memory_limit')} each; peak RSS per worker (MB): "
        f"{t.get('worker_peak_rss_mb')}.",
    ]
    f = t.get("fit")
    if f:
        lines += [
            "",
            f"**Full fit on the table**{EARLIER if f.get('earlier_run') else ''} "
            f"(rff D={f['D']}, d=2, τ={TAU:g}, max_iter {f['max_iter']}, max_inner "
            f"{f['max_inner']}): {f['seconds']:.0f} s, {f['n_evaluations']} evaluations, {fmt(f['evaluation'])} s "
            f"per evaluation ({f['ratio_eval_to_moments']:.2f} x the moments pass), driver "
            f"{f['driver_seconds']:.0f} s (σ sample, start, L-BFGS), status {f['status']}, explained variance "
            f"{f.get('explained_variance', float('nan')):.4f}, rff MMD² {f.get('mmd2_rff', float('nan')):.3g}, exact "
            f"MMD² on a {t.get('check_rows_per_group', '')} "
            f"stratified sample {f.get('mmd2_exact_on_sample', float('nan')):.3g} "
            f"(PCA: {f.get('mmd2_exact_pca_on_sample', float('nan')):.3g}), null-bias floor "
            f"{f.get('null_bias_floor', float('nan')):.2g}; inner steps per outer iteration {f.get('inner_steps')}; "
            f"MMD² per outer {', '.join(f'{x:.3g}' for x in f.get('mmd2_per_outer', []))}; load "
            f"{f['load_before']:.2f}→{f['load_after']:.2f}."
            + (f" Warnings: {'; '.join(f['warnings'])}" if f.get("warnings") else ""),
        ]
    prof = t.get("profile")
    if prof and "by_D" in prof:
        lines += [
            "",
            f"**Where an rff evaluation goes**{EARLIER if prof.get('earlier_run') else ''}"
            f" (one slab of {prof['rows']:,} rows x {prof['features']}, "
            "1 thread, "
            "best of 3, 1 run at D ≥ 1000; the pass runs this on every slab):",
            "",
            "| step | " + " | ".join(f"D={D} s" for D in prof["by_D"]) + " |",
            "|---|" + "---|" * len(prof["by_D"]),
        ]
        first = next(iter(prof["by_D"].values()))
        for key in first["steps"]:
            lines.append(f"| {key} | " + " | ".join(f"{v['steps'][key]:.3f}" for v in prof["by_D"].values()) + " |")
        for key in first["variants"]:
            lines.append(
                f"| variant: {key} | "
                + " | ".join(
                    f"{v['variants'][key]:.3f}" if key in v["variants"] else "–" for v in prof["by_D"].values()
                )
                + " |"
            )
        lines.append(
            f"| {prof['accuracy_of']}: relative error of h / of the gradient | "
            + " | ".join(
                f"{v['accuracy']['relative_error_h']:.1e} / {v['accuracy']['relative_error_gradient']:.1e}"
                for v in prof["by_D"].values()
            )
            + " |"
        )
    err = t.get("rff_error")
    if err and "errors" in err:
        lines += [
            "",
            f"**RFF error vs D**{EARLIER if err.get('earlier_run') else ''}"
            f" ({err['rows']:,} in-memory rows of the same generator, "
            f"σ {err['sigma']:.4g}; "
            f"{err['case']['seeds']} feature seeds per D): RMS error of the rff MMD² against exact.",
            "",
            "| projection | exact MMD² | D | rff mean ± sd | RMS error | RMS rel. error | s per estimate |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in err["errors"]:
            lines.append(
                f"| {r['projection']} | {r['exact']:.4g} | {r['D']} | {r['rff_mean']:.4g} ± {r['rff_sd']:.2g} | "
                f"{r['rms_error']:.2g} | {r['rms_relative_error']:.2g} | {r['seconds_per_estimate']:.2f} |"
            )
    return lines + [""]


def _blocks_md(b: dict | None) -> list[str]:
    if not b or not b.get("evals"):
        return []
    lines = [
        f"## 4. Kernel-block size of the exact evaluation (`block_rows`, default {DEFAULT_BLOCK_ROWS})",
        "",
        "| N | d | block_rows | s per evaluation | blocks | peak MB | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in b["evals"]:
        c = r["case"]
        if "evaluation" not in r:
            lines.append(f"| {c['n']} | {c['d']} | {c['block_rows']} | error | | | |")
            continue
        lines.append(
            f"| {r['rows']:,} | {c['d']} | {c['block_rows']} | {fmt(r['evaluation'], 3)} | {fmt(r['blocks'], 3)} | "
            f"{r['peak_rss_mb']:.0f} | {r['load_before']:.2f}→{r['load_after']:.2f} |"
        )
    return lines + [""]


def _exact_md(e: dict | None) -> list[str]:
    if not e or "evals" not in e:
        return []
    lines = [
        "## 3. Exact evaluation vs N (synthetic, p = 20, d = 2, in memory)",
        "",
        "| N | s per evaluation | projected | blocks | backprojected | a·N² | peak MB | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    a = e.get("fit_a", float("nan"))
    for r in e["evals"]:
        if "evaluation" not in r:
            lines.append(f"| {r['case']['n']} | error | | | | | | |")
            continue
        lines.append(
            f"| {r['rows']:,} | {fmt(r['evaluation'], 3)} | {fmt(r['projected'], 4)} | {fmt(r['blocks'], 3)} | "
            f"{fmt(r['backprojected'], 4)} | {a * r['rows'] ** 2:.3g} | {r['peak_rss_mb']:.0f} | "
            f"{r['load_before']:.2f}→{r['load_after']:.2f} |"
        )
    lines += [
        "",
        f"Fit t = a·N² with a = {a:.3g} s (relative residuals "
        f"{', '.join(f'{x:+.2f}' for x in e.get('fit_relative_residuals', []))}); "
        f"{1 / a / 1e6 if a == a else float('nan'):.0f} M row pairs/s counting all N² ordered pairs.",
    ]
    pr = e.get("probe")
    pred = e.get("predicted")
    if pr and pred:
        lines.append(
            f"Evaluations per fit from a full `estimator='sample'` fit (2,500 rows per group of "
            f"{pr.get('rows', 0):,}): {pr.get('n_evaluations')} ({pr.get('status')}, {pr.get('seconds', 0):.0f} s). "
            f"Largest N predicted to finish in the budget: **{pred['n']:,}** ({pred['seconds']:.0f} s predicted)."
        )
    f = e.get("fit")
    if f and "seconds" in f:
        lines.append(
            f"Exact fit at N = {f['rows']:,}: {f['seconds']:.0f} s, {f['n_evaluations']} evaluations, "
            f"{fmt(f['evaluation'], 3)} s per evaluation, status {f['status']}, explained variance "
            f"{f.get('explained_variance', float('nan')):.4f}, exact MMD² {f.get('mmd2_exact', float('nan')):.3g}, "
            f"peak {f['peak_rss_mb']:.0f} MB, load {f['load_before']:.2f}→{f['load_after']:.2f}."
        )
    elif f:
        lines.append(f"Exact fit: {f.get('error')}")
    return lines + [""]


# ------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--parts", default="adult,table,exact")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and caps (checks the script)")
    parser.add_argument("--name", default="mmd_scale")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rff-d", type=ints, default=[100, 300, 1000])
    parser.add_argument("--adult-d", type=ints, default=[2, 10], help="2 always; 10 adds three small cases")
    parser.add_argument("--adult-rff-d", type=ints, default=[100, 1000], help="uncapped rff fits at d=2")
    parser.add_argument("--adult-extra", type=ints, default=[], help="uncapped rff fits at d=2, run last")
    parser.add_argument("--adult-exact-max-iter", type=int, default=1)
    parser.add_argument("--adult-exact-max-inner", type=int, default=10)
    parser.add_argument("--adult-d10-exact-max-inner", type=int, default=3)
    parser.add_argument("--adult-exact-deadline", type=float, default=1500.0)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument("--table-fit-d", type=int, default=100)
    parser.add_argument(
        "--table-steps",
        default="passes,fit,profile,error",
        help="any of passes (timed passes), fit, profile, error; the steps not run keep the "
        "results of an earlier run (--merge / --combine), marked as such",
    )
    parser.add_argument("--profile-d", type=ints, default=[], help="D of the slab profile (default --rff-d)")
    parser.add_argument("--big-d-repeats", type=int, default=1, help="timed table passes at D >= 1000")
    parser.add_argument("--worker-memory", default="8GB", help="LocalCluster memory_limit per worker")
    parser.add_argument("--combine", type=Path, nargs="*", default=[], help="merge the parts of these result files")
    parser.add_argument("--table-max-iter", type=int, default=0, help="0: from --table-fit-budget")
    parser.add_argument("--table-fit-budget", type=float, default=840.0)
    parser.add_argument("--table-max-inner", type=int, default=5)
    parser.add_argument("--table-fit-deadline", type=float, default=1200.0)
    parser.add_argument("--check-rows", type=int, default=20_000, help="rows per group of the table fit's exact check")
    parser.add_argument("--error-rows", type=int, default=20_000)
    parser.add_argument("--error-d", type=ints, default=[100, 300, 1000, 3000])
    parser.add_argument("--error-seeds", type=int, default=5)
    parser.add_argument("--exact-n", type=ints, default=[10_000, 20_000, 50_000, 100_000])
    parser.add_argument("--exact-probe-n", type=int, default=20_000)
    parser.add_argument("--exact-budget", type=float, default=600.0)
    parser.add_argument("--blocks-n", type=int, default=20_000)
    parser.add_argument("--block-sizes", type=ints, default=[256, 512, 1024, 2048])
    parser.add_argument("--case-timeout", type=float, default=3600.0)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where <name>.{md,json} go")
    parser.add_argument("--merge", action="store_true", help="keep the other parts of an existing <name>.json")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    if args.case:
        case = json.loads(args.case)
        print("RESULT " + json.dumps(CASES[case["kind"]](case), default=float), flush=True)
        return
    if args.smoke:
        args.rows, args.repeats, args.rff_d, args.exact_n = 200_000, 2, [100, 300], [2000, 4000]
        args.adult_d, args.adult_rff_d, args.adult_extra = [2], [100], []
        args.error_rows, args.error_d, args.error_seeds = 3000, [100, 300], 2
        args.exact_probe_n, args.exact_budget, args.table_max_iter, args.table_max_inner = 4000, 20.0, 1, 3
        args.check_rows, args.rows_per_file = 2000, 50_000
        if args.name == "mmd_scale":
            args.name = "mmd_scale_smoke"
            args.results = SCRATCH
    from provenance import provenance

    command = " ".join(["benchmarks/bench_mmd_scale.py", *sys.argv[1:]])
    previous = args.results / f"{args.name}.json"
    result: dict = json.loads(previous.read_text()) if args.merge and previous.exists() else {}
    result.setdefault("runs", []).append(
        {
            "command": command,
            "provenance": provenance(MEASURED),
            "load_start": load(),
            "args": {k: str(v) for k, v in vars(args).items()},
        }
    )
    result["command"] = " + ".join(r["command"] for r in result["runs"])
    result["provenance"] = "; ".join(dict.fromkeys(r["provenance"] for r in result["runs"]))
    for other in args.combine:
        extra = json.loads(other.read_text())
        for key, value in extra.items():
            if key == "runs":
                result["runs"] = value + result["runs"]
            elif key in ("adult", "table", "exact", "blocks") or key.endswith("_part_seconds"):
                result[key] = value
        result["command"] = " + ".join(r["command"] for r in result["runs"])
        result["provenance"] = "; ".join(dict.fromkeys(r["provenance"] for r in result["runs"]))
    started = time.perf_counter()
    parts = [x for x in args.parts.split(",") if x]
    for part in ("adult", "table", "exact", "blocks"):
        if part in parts:
            print(f"== part {part}", flush=True)
            t0 = time.perf_counter()
            earlier = result.pop(part, None) or {}
            if part == "table":  # the table steps not run keep an earlier run's results, marked
                steps = args.table_steps.split(",")
                if "passes" not in steps:
                    result["table"] = earlier
                else:
                    result["table"] = {
                        key: {**earlier[key], "earlier_run": True}
                        for key, step in (("fit", "fit"), ("profile", "profile"), ("rff_error", "error"))
                        if step not in steps and isinstance(earlier.get(key), dict)
                    }
            try:
                {"adult": part_adult, "table": part_table, "exact": part_exact, "blocks": part_blocks}[part](
                    args, result
                )
            except Exception as error:  # keep the other parts' results
                import traceback

                traceback.print_exc()
                result.setdefault(part, {})["error"] = f"{type(error).__name__}: {error}"
            result[f"{part}_part_seconds"] = time.perf_counter() - t0
            write(result, args)
    if "adult" in result and "adult" not in parts:
        project_exact(result)
    result["runs"][-1]["seconds"] = time.perf_counter() - started
    result["runs"][-1]["load_end"] = load()
    write(result, args)
    print((args.results / f"{args.name}.md").read_text())


def project_exact(result: dict) -> None:
    """Uncapped exact time ≈ evaluations of the uncapped rff D=1000 fit x median exact evaluation."""
    fits = [f for f in result.get("adult", {}).get("fits", []) if "error" not in f]
    text = []
    for d in sorted({f["case"]["d"] for f in fits}):
        exact = next((f for f in fits if f["case"]["d"] == d and f["case"]["estimator"] == "exact"), None)
        rff = [
            f
            for f in fits
            if f["case"]["d"] == d and f["case"]["estimator"] == "rff" and f["case"].get("max_iter") is None
        ]
        if exact and rff and exact["evaluation"]["n"]:
            ref = max(rff, key=lambda f: f["case"]["D"])
            seconds = ref["n_evaluations"] * exact["evaluation"]["median"]
            quiet = ref["n_evaluations"] * exact["evaluation"]["min"]
            text.append(
                f"d={d}: an uncapped exact fit ≈ {ref['n_evaluations']} evaluations (as the uncapped rff "
                f"D={ref['case']['D']} fit) x {exact['evaluation']['median']:.2f} s (median exact evaluation "
                f"of the capped fit) = {seconds / 3600:.1f} h; with its fastest evaluation "
                f"({exact['evaluation']['min']:.2f} s, least contention) {quiet / 3600:.1f} h."
            )
    if text:
        result["adult"]["projection"] = "**Projected uncapped exact fit.** " + " ".join(text)


if __name__ == "__main__":
    main()
