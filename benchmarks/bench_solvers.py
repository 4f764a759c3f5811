"""Every solver in ``SOLVERS`` at p ∈ {20, 100, 500, 1764}, r ∈ {2, 10}, against one ``eigh`` at p.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_solvers.py            # full (~30 min)
    .venv/bin/python benchmarks/bench_solvers.py --quick --results benchmarks/scratch/quick
                                                  # p ∈ {20, 100}, 1 repeat, 20 s cap (< 3 min)

Options: --sizes, --ranks, --methods, --repeats (3; 1 with --quick), --cap (seconds per fit:
120; 20 with --quick), --sample-rows (rows per group given to the row-reading methods: 1000),
--results (folder for solvers.{md,json} and solver_time_vs_p.png; default benchmarks/results).

Data: LFW faces (Samadi et al.'s version, ../shared/data/lfw_samadi: 13,232 images of 49 x 36
pixels), pixels / 255, two groups female (2,962) / male (10,270) from ``sex.txt``, as
bench_eig_limit.py and bench_samadi_timing.py load it. For p < 1764 the reduction is the one
bench_samadi_timing.py uses: the p pixels at evenly spaced positions of the row-major image
(``np.linspace(0, 1763, p).round()``), i.e. the same faces at a coarser, irregular sampling;
no noise is added and the group spectra are LFW's own. Every method fits with
``center="group"`` (Samadi's LFW convention) and ``random_state=0``.

Methods and options: every key of ``fairpca_dist.solvers.SOLVERS`` (at the commit run) with its
defaults, except ``mmd``: ``tau=1e-2`` (the default 1e-3 is below the null-bias floor of the
row sample below, where the library warns it can only be met by collapsing the projection;
1e-2 is the looser level of ``comparison.COMPARE_GRIDS``). The two methods that read rows
during the fit (``SOLVERS[m].reads_rows(options)``: ``mm-robust``, and ``mmd`` with its default
RBF kernel and exact estimator) are fitted on an in-memory sample, ``--sample-rows`` rows per
group drawn without replacement (seed 0), through ``ArrayPasses`` and the sample's own
``GroupMoments``; every other method fits on the moments of all 13,232 rows.

One evaluator: every fit is scored by ``fairpca_dist.assessment.scoring.score_projection`` on the moments
of all rows (the row-reading methods with the centres of their fitting sample, as a model is
used): explained-variance fraction of all rows, largest Samadi loss, largest group
reconstruction error about the group's own mean, smallest group variance (Babu et al.'s
criterion). The certificate gap is (upper − lower) / |upper| for a FairProjection whose
``certificate`` has both ``lower_bound`` and ``upper_bound`` (samadi-*, fair-eig, mm, dro); "–" elsewhere.

Timing: fits run in one worker process (``multiprocessing`` spawn, 1 BLAS thread,
OPENBLAS_NUM_THREADS=1 set before numpy loads; address space capped at ``--memory-gb``) that
loads the data once and fits every method once untimed at p = 20, r = 2 (100 sample rows per
group) so that imports (cvxpy) and first calls are not charged to the first cell; the parent
waits at most ``--cap`` seconds for each fit and otherwise kills
the worker (the cell is "timeout > cap") and starts a new one for the next cell. Per cell the
wall time of ``fit_projection`` is the median of ``--repeats`` fits (a fit over 30 s is not
repeated). The baseline, measured in the same worker right before and after every cell: one
``np.linalg.eigh`` of the female group's p × p covariance (median of as many calls as fit in
0.3 s, at least 1); the cell's unit is the median of the two measurements around it, and
"eigh-eq" is fit time / unit. The pca fit at the same (p, r) is the second baseline (× pca).
No timing asserts.

Skips: a method that timed out at (p, r) is skipped at every larger p for that r, and at
(p, 10) and every larger p when it timed out at (p, 2). A method is also skipped when its time predicted from the two
largest p measured at that r, t·(p'/p)^max(slope, floor), exceeds the cap (no prediction from
a single p: at p = 20 a fit is mostly fixed overhead); floor = 3 for the cvxpy SDPs
(samadi-sdp, olfat-sdp: an SCS iteration is a p × p eigendecomposition and the iteration count
grows with p), 1 for the rest. The reason is written in the table.

Writes <results>/solvers.{md,json} (json: every cell, every eigh unit, the load averages, and
a flat ``ratios`` list for benchmarks/run_all.py) and <results>/solver_time_vs_p.png.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy: the fits and the eigh unit on 1 BLAS thread

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from provenance import provenance  # noqa: E402

DATA = Path(os.environ.get("FAIRPCA_DATA", HERE.parents[1] / "shared" / "data"))
SIZES, QUICK_SIZES, RANKS = (20, 100, 500, 1764), (20, 100), (2, 10)
EXTRA_OPTIONS = {"mmd": {"tau": 1e-2}}
SDP_METHODS = ("samadi-sdp", "olfat-sdp")
NO_REPEAT_ABOVE = 30.0  # seconds: a fit this slow is timed once
UNIT_BUDGET = 0.3  # seconds of eigh calls per unit measurement
STARTUP_TIMEOUT = 120.0  # seconds for a new worker to import and load LFW


# ----------------------------------------------------------------------------- worker side


def _lfw() -> tuple[np.ndarray, np.ndarray]:
    images = np.load(DATA / "lfw_samadi" / "lfw_images_49x36.npz")["images"].astype(np.float64) / 255.0
    labels = np.where(np.loadtxt(DATA / "lfw_samadi" / "sex.txt").astype(int) == 1, "male", "female")
    return images, labels


def columns_for(p: int, n_features: int) -> np.ndarray:
    """The reduction: p evenly spaced pixel positions of the row-major 49 x 36 image."""
    columns = np.unique(np.linspace(0, n_features - 1, p).round().astype(int))
    if columns.size != p:
        raise ValueError(f"p={p}: {columns.size} distinct pixel positions")
    return columns


class Problem:
    """The data at one p: all-row moments, the row sample (moments + ArrayPasses), the eigh matrix."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, p: int, sample_rows: int) -> None:
        from fairpca_dist import GroupMoments
        from fairpca_dist.engine.datapasses import ArrayPasses

        x = images if p == images.shape[1] else images[:, columns_for(p, images.shape[1])]
        self.moments = GroupMoments.from_arrays(x, labels)
        rng = np.random.default_rng(0)
        rows = np.concatenate(
            [rng.choice(np.flatnonzero(labels == g), sample_rows, replace=False) for g in self.moments.groups]
        )
        self.sample = GroupMoments.from_arrays(x[rows], labels[rows])
        self.passes = ArrayPasses(x[rows], labels[rows], self.sample.groups)
        self.matrix = np.ascontiguousarray(self.moments.covariance("group")[0])


def eigh_unit(matrix: np.ndarray) -> dict:
    times = []
    while not times or (sum(times) < UNIT_BUDGET and len(times) < 200):
        started = time.perf_counter()
        np.linalg.eigh(matrix)
        times.append(time.perf_counter() - started)
    return {"seconds": float(np.median(times)), "calls": len(times), "at": time.time()}


def serve(conn, methods: list[str], sample_rows: int, memory_gb: float) -> None:
    """Worker loop: requests (method, p, r, repeats) -> messages "fit-start", "fit-end", "done"."""
    import resource

    if memory_gb > 0:
        limit = int(memory_gb * 1e9)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    warnings.simplefilter("ignore")  # statuses are recorded; warnings would only clutter the log
    from fairpca_dist import SOLVERS, fit_projection
    from fairpca_dist.assessment.scoring import score_projection

    images, labels = _lfw()
    warm = Problem(images, labels, 20, 100)
    for method in methods:  # untimed: imports (cvxpy), first solver calls, thread pools
        options = dict(EXTRA_OPTIONS.get(method, {}))
        reads_rows = SOLVERS[method].reads_rows(options)
        try:
            fit_projection(
                warm.sample if reads_rows else warm.moments,
                2,
                method=method,
                random_state=0,
                **options,
                **({"passes": warm.passes} if reads_rows else {}),
            )
        except Exception:  # the timed fit will report it
            pass
    problems: dict[int, Problem] = {}
    last_unit: dict[int, dict] = {}
    conn.send(("ready", os.getpid()))
    while True:
        request = conn.recv()
        if request is None:
            return
        method, p, r, repeats = request
        try:
            if p not in problems:
                problems.clear()  # one p at a time: p = 1764 moments are 50 MB each
                problems[p] = Problem(images, labels, p, sample_rows)
            problem = problems[p]
            before = last_unit.get(p) or eigh_unit(problem.matrix)
            options = dict(EXTRA_OPTIONS.get(method, {}))
            reads_rows = SOLVERS[method].reads_rows(options)
            fitted_on = problem.sample if reads_rows else problem.moments
            if reads_rows:
                options["passes"] = problem.passes
            times, result = [], None
            for attempt in range(repeats):
                conn.send(("fit-start", attempt))
                started = time.perf_counter()
                result = fit_projection(fitted_on, r, method=method, random_state=0, **options)
                times.append(time.perf_counter() - started)
                conn.send(("fit-end", times[-1]))
                if times[-1] > NO_REPEAT_ABOVE:
                    break
            after = eigh_unit(problem.matrix)
            last_unit[p] = after
            scores = score_projection(result, fitted_on, problem.moments)
            cert = {
                k: (float(v) if isinstance(v, (int, float, np.floating, np.integer)) else str(v))
                for k, v in result.certificate.items()
            }
            gap = None
            if "lower_bound" in cert and "upper_bound" in cert:
                upper, lower = cert["upper_bound"], cert["lower_bound"]
                gap = (upper - lower) / max(abs(upper), 1e-300)
            conn.send(
                (
                    "done",
                    {
                        "times": times,
                        "seconds": float(np.median(times)),
                        "units": [before, after],
                        "unit_seconds": float(np.median([before["seconds"], after["seconds"]])),
                        "status": result.status,
                        "converged": bool(result.converged),
                        "n_iter": int(result.n_iter),
                        "output_rank": int(result.components.shape[1]),
                        "fitted_on": f"sample of {sample_rows} rows per group" if reads_rows else "all rows",
                        "explained_variance_ratio": scores.explained_variance_ratio,
                        "max_loss": scores.max_loss,
                        "max_group_error": float(scores.group_error_within.max()),
                        "min_group_variance": scores.min_group_variance,
                        "certificate": cert,
                        "certificate_gap": gap,
                        "options": {k: v for k, v in options.items() if k != "passes"},
                    },
                )
            )
        except MemoryError:
            conn.send(("error", f"MemoryError (address space capped at {memory_gb:g} GB)"))
        except Exception as exc:  # a failing fit is a result too
            conn.send(("error", f"{type(exc).__name__}: {str(exc)[:300]}"))


# ----------------------------------------------------------------------------- parent side


class Worker:
    """The fitting process; killed on a timeout and started again for the next cell."""

    def __init__(self, methods: list[str], sample_rows: int, memory_gb: float) -> None:
        self.methods, self.sample_rows, self.memory_gb = methods, sample_rows, memory_gb
        self.proc = self.conn = None
        self.starts = 0

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, self.methods, self.sample_rows, self.memory_gb), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(STARTUP_TIMEOUT):
            raise RuntimeError("the worker did not start")
        self.conn.recv()
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
        self.proc = self.conn = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(10)
        self.kill()

    def run(self, method: str, p: int, r: int, repeats: int, cap: float) -> dict:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send((method, p, r, repeats))
        fit_times: list[float] = []
        while True:
            # The cap bounds each fit; the setup (moments at a new p, the eigh unit) gets its own allowance.
            waiting_for_fit = bool(fit_times) and fit_times[-1] < 0
            timeout = cap if waiting_for_fit else max(cap, STARTUP_TIMEOUT)
            try:
                ready = self.conn.poll(timeout)
                message = self.conn.recv() if ready else None
            except (EOFError, OSError):
                code = self.proc.exitcode if self.proc is not None else None
                self.kill()
                return {"status": "crashed", "reason": f"worker died (exit code {code})", "times": fit_times}
            if message is None:
                self.kill()
                if waiting_for_fit:
                    return {"status": "timeout", "reason": f"timeout > {cap:g} s", "times": fit_times[:-1]}
                return {"status": "error", "reason": "setup took too long", "times": []}
            kind, payload = message
            if kind == "fit-start":
                fit_times.append(-1.0)
            elif kind == "fit-end":
                fit_times[-1] = payload
            elif kind == "done":
                return payload
            else:  # "error"
                return {"status": "error", "reason": payload, "times": [t for t in fit_times if t >= 0]}


def predicted_seconds(method: str, measured: dict[int, float], p: int) -> float | None:
    """t(p_last)·(p / p_last)^max(slope, floor) from the two largest measured p (module docstring)."""
    points = sorted(measured.items())
    if len(points) < 2:
        return None  # one small p is mostly fixed overhead: no prediction from it
    floor = 3.0 if method in SDP_METHODS else 1.0
    (p1, t1), (p2, t2) = points[-2], points[-1]
    slope = max(float(np.log(t2 / t1) / np.log(p2 / p1)), floor)
    return t2 * (p / p2) ** slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="p in {20, 100}, 1 repeat, 20 s cap")
    parser.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=None)
    parser.add_argument("--ranks", type=lambda s: [int(v) for v in s.split(",")], default=list(RANKS))
    parser.add_argument("--methods", type=lambda s: s.split(","), default=None, help="default: every key of SOLVERS")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--cap", type=float, default=None, help="seconds per fit (120; 20 with --quick)")
    parser.add_argument("--sample-rows", type=int, default=1000, help="rows per group for the row-reading methods")
    parser.add_argument("--memory-gb", type=float, default=8.0, help="address-space cap of the worker (0: none)")
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument(
        "--render",
        type=Path,
        default=None,
        help="only rewrite solvers.md and the PNG in --results from this solvers.json",
    )
    args = parser.parse_args()
    if args.render:
        result = json.loads(args.render.read_text())
        args.results.mkdir(parents=True, exist_ok=True)
        units = {int(p): v for p, v in result["eigh_units"].items()}
        plot(
            result["cells"],
            result["sizes"],
            result["ranks"],
            result["methods"],
            units,
            result["cap_seconds"],
            args.results / "solver_time_vs_p.png",
        )
        write_markdown(result, args.results / "solvers.md")
        return
    sizes = args.sizes or list(QUICK_SIZES if args.quick else SIZES)
    repeats = args.repeats or (1 if args.quick else 3)
    cap = args.cap or (20.0 if args.quick else 120.0)

    from fairpca_dist import SOLVERS

    methods = args.methods or list(SOLVERS)
    custom = any(v is not None for v in (args.sizes, args.methods, args.repeats, args.cap)) or args.ranks != list(RANKS)
    command = "benchmarks/bench_solvers.py" + "".join(f" {a}" for a in sys.argv[1:])
    prov = provenance(
        [
            "benchmarks/bench_solvers.py",
            "fairpca_dist/assessment/scoring.py",
            "fairpca_dist/solvers/__init__.py",
            *sorted(
                f"fairpca_dist/solvers/{f.name}"
                for f in (HERE.parent / "fairpca_dist" / "solvers").glob("*.py")
                if f.name != "__init__.py"
            ),
        ]
    )
    load_start = os.getloadavg()
    started = time.perf_counter()
    worker = Worker(methods, args.sample_rows, args.memory_gb)
    cells: list[dict] = []
    measured: dict[tuple[str, int], dict[int, float]] = {}  # (method, r) -> {p: seconds}
    timed_out: dict[tuple[str, int], int] = {}  # (method, r) -> the p where it timed out
    try:
        for p in sizes:
            for r in args.ranks:
                for method in methods:
                    cell = {"method": method, "p": p, "r": r}
                    reason = None
                    if (method, r) in timed_out:
                        reason = f"timed out (> {cap:g} s) at p = {timed_out[(method, r)]}"
                    elif r != args.ranks[0] and timed_out.get((method, args.ranks[0])) == p:
                        reason = f"timed out (> {cap:g} s) at r = {args.ranks[0]}, same p"
                    else:
                        guess = predicted_seconds(method, measured.get((method, r), {}), p)
                        if guess is not None and guess > cap:
                            reason = f"predicted {guess:.0f} s > cap {cap:g} s"
                    if reason:
                        cell.update(status="skipped", reason=reason)
                        if "timed out" in reason:
                            timed_out.setdefault((method, r), p)  # and at every larger p
                    else:
                        cell.update(worker.run(method, p, r, repeats, cap))
                        if cell["status"] == "timeout":
                            timed_out[(method, r)] = p
                        elif "seconds" in cell:
                            measured.setdefault((method, r), {})[p] = cell["seconds"]
                    cell["load_1min"] = os.getloadavg()[0]
                    cells.append(cell)
                    print(summary_line(cell), flush=True)
    finally:
        worker.close()
    total = time.perf_counter() - started
    load_end = os.getloadavg()
    pca = {(c["p"], c["r"]): c["seconds"] for c in cells if c["method"] == "pca" and "seconds" in c}
    for cell in cells:
        if "seconds" in cell:
            cell["eigh_equivalents"] = cell["seconds"] / cell["unit_seconds"]
            cell["vs_pca"] = cell["seconds"] / pca[(cell["p"], cell["r"])] if (cell["p"], cell["r"]) in pca else None
    ratios = [
        {
            "area": "solvers",
            "case": f"{c['method']} p={c['p']} r={c['r']}",
            "ours_seconds": c["seconds"],
            "baseline": "one eigh at p",
            "baseline_seconds": c["unit_seconds"],
            "ratio": c["eigh_equivalents"],
        }
        for c in cells
        if "seconds" in c
    ]
    units = {p: [u["seconds"] for c in cells if c["p"] == p and "units" in c for u in c["units"]] for p in sizes}
    result = {
        "command": command,
        "provenance": prov,
        "mode": ("quick" if args.quick else "full") + (" with overrides" if custom else ""),
        "sizes": sizes,
        "ranks": args.ranks,
        "methods": methods,
        "repeats": repeats,
        "cap_seconds": cap,
        "sample_rows_per_group": args.sample_rows,
        "extra_options": EXTRA_OPTIONS,
        "worker_starts": worker.starts,
        "load_average_start": load_start,
        "load_average_end": load_end,
        "load_1min_during": [c["load_1min"] for c in cells],
        "wall_seconds": total,
        "eigh_units": {str(p): v for p, v in units.items()},
        "cells": cells,
        "ratios": ratios,
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "solvers.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    plot(cells, sizes, args.ranks, methods, units, cap, args.results / "solver_time_vs_p.png")
    write_markdown(result, args.results / "solvers.md")
    print(f"wrote {args.results}/solvers.{{md,json}}, solver_time_vs_p.png in {total:.0f} s")


def summary_line(c: dict) -> str:
    if "seconds" not in c:
        return f"{c['method']:>17} p={c['p']:<5} r={c['r']:<3} {c['status']}: {c.get('reason', '')}"
    return (
        f"{c['method']:>17} p={c['p']:<5} r={c['r']:<3} {c['seconds']:9.4f} s  "
        f"{c['seconds'] / c['unit_seconds']:9.2f} eigh  {c['status']:<12} evr {c['explained_variance_ratio']:.4f} "
        f"max loss {c['max_loss']:.3e}  load {c['load_1min']:.2f}"
    )


def fmt(value: float | None, spec: str) -> str:
    return "–" if value is None or not np.isfinite(value) else format(value, spec)


def write_markdown(r: dict, path: Path) -> None:
    cells, sizes, ranks, methods = r["cells"], r["sizes"], r["ranks"], r["methods"]
    loads = r["load_1min_during"]
    by_key = {(c["method"], c["p"], c["r"]): c for c in cells}
    lines = [
        "# Every solver against one eigendecomposition: time, objective, certificate gap",
        "",
        f"`OPENBLAS_NUM_THREADS=1 .venv/bin/python {r['command']}` ({r['mode']} mode, "
        f"{r['wall_seconds'] / 60:.1f} min); "
        f"{r['provenance']}.",
        "",
        f"Load average (1/5/15 min) at the start {' / '.join(f'{v:.2f}' for v in r['load_average_start'])}, at the end "
        f"{' / '.join(f'{v:.2f}' for v in r['load_average_end'])}; 1-min load after each cell: median "
        f"{np.median(loads):.2f}, range {min(loads):.2f}–{max(loads):.2f} (2 cores shared with other jobs).",
        "",
        "Data: LFW (13,232 faces, pixels / 255, female 2,962 / male 10,270); p < 1764 = the p pixels at evenly "
        "spaced positions of the 49 x 36 image (as bench_samadi_timing.py). Methods: every key of `SOLVERS` with "
        f'its defaults, `center="group"`, `random_state=0`; extra options {r["extra_options"]}. '
        f"`mm-robust` and `mmd` (RBF kernel, exact estimator) read rows: they fit on a sample of "
        f"{r['sample_rows_per_group']} rows per group (seed 0) through `ArrayPasses`; every other method on the "
        "moments of all rows. Every fit is scored by `scoring.score_projection` on all rows.",
        "",
        f"Time: median of {r['repeats']} `fit_projection` calls (one when a fit takes > {NO_REPEAT_ABOVE:g} s) in one "
        f"worker process on 1 BLAS thread, cap {r['cap_seconds']:g} s per fit. Baseline in the same process: one "
        "`np.linalg.eigh` of the female group's p × p covariance, measured before and after every cell; "
        '"eigh-eq" = fit time / the median of those two. "× pca" = fit time / the pca fit at the same (p, r). '
        "Unit over the run per p (median, range): "
        + "; ".join(
            f"p = {p}: {fmt(np.median(v) if v else None, '.2e')} s" + (f" ({min(v):.2e}–{max(v):.2e})" if v else "")
            for p, v in ((int(k), v) for k, v in r["eigh_units"].items())
        )
        + ".",
        "",
    ]
    for rank in ranks:
        lines += [
            f"## r = {rank}: fit time in eigh-equivalents (seconds)",
            "",
            "| method | " + " | ".join(f"p = {p}" for p in sizes) + " |",
            "|---|" + "---|" * len(sizes),
        ]
        for method in methods:
            row = []
            for p in sizes:
                c = by_key.get((method, p, rank))
                if c is None:
                    row.append("")
                elif "seconds" in c:
                    row.append(f"{c['eigh_equivalents']:.3g} ({c['seconds']:.3g} s)")
                elif c["status"] == "skipped":
                    row.append(f"skipped ({c['reason']})")
                else:
                    row.append(f"{c['status']} ({c['reason']})")
            lines.append(f"| {method} | " + " | ".join(row) + " |")
        lines.append("")
    lines += [
        "## Every cell",
        "",
        "EVR: explained-variance fraction of all rows; max loss: largest Samadi loss (err_g − err_g*(r)); "
        "max err: largest group reconstruction error about the group's own mean; min var: smallest group "
        "variance kept (Babu et al.); gap: (upper − lower) / |upper| of the FairProjection's certificate; "
        "rank: columns of the output (Samadi's solvers may return r + k − 1).",
        "",
        "| method | p | r | time s (median [min–max], n) | eigh-eq | × pca | EVR | max loss | max err | min var | "
        "gap | status | rank | fitted on |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        head = f"| {c['method']} | {c['p']} | {c['r']} |"
        if "seconds" not in c:
            lines.append(
                f"{head} {c['status']}: {c.get('reason', '')} | – | – | – | – | – | – | – | {c['status']} | – | – |"
            )
            continue
        t = c["times"]
        lines.append(
            f"{head} {c['seconds']:.4g} [{min(t):.4g}–{max(t):.4g}], {len(t)} | {c['eigh_equivalents']:.3g} | "
            f"{fmt(c['vs_pca'], '.3g')} | {c['explained_variance_ratio']:.4f} | {c['max_loss']:.3e} | "
            f"{c['max_group_error']:.4g} | {c['min_group_variance']:.4g} | {fmt(c['certificate_gap'], '.1e')} | "
            f"{c['status']} | {c['output_rank']} | {c['fitted_on']} |"
        )
    lines += [
        "",
        "Plot: `solver_time_vs_p.png` (log-log, one line per method, the eigh baseline dashed; "
        "a cross at the cap marks a timeout). JSON: every cell with its timings, units, certificate and "
        "load, and the flat `ratios` list (ratio = fit time / one eigh at p).",
    ]
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def plot(
    cells: list[dict], sizes: list[int], ranks: list[int], methods: list[str], units: dict, cap: float, path: Path
) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ranks), figsize=(6.5 * len(ranks), 5.5), sharey=True, squeeze=False)
    colours = plt.get_cmap("tab20")(np.linspace(0, 1, max(len(methods), 2)))
    markers = "osD^v<>ph*XP8d"
    for ax, rank in zip(axes[0], ranks, strict=True):
        for k, method in enumerate(methods):
            done = sorted(
                (c["p"], c["seconds"]) for c in cells if c["method"] == method and c["r"] == rank and "seconds" in c
            )
            style = dict(color=colours[k], marker=markers[k % len(markers)])
            if done:
                ax.plot(*zip(*done, strict=True), label=method, lw=1.3, ms=5, **style)
            timeouts = [c["p"] for c in cells if c["method"] == method and c["r"] == rank and c["status"] == "timeout"]
            if timeouts:
                ax.plot(
                    timeouts,
                    [cap] * len(timeouts),
                    ls="none",
                    marker="x",
                    ms=9,
                    mew=2,
                    color=colours[k],
                    label=None if done else f"{method} (timeout)",
                )
        baseline = [(p, float(np.median(v))) for p, v in units.items() if v]
        if baseline:
            ax.plot(*zip(*sorted(baseline), strict=True), "k--", lw=2, label="one eigh (baseline)")
        ax.axhline(cap, color="grey", lw=0.8, ls=":")
        ax.set(xscale="log", yscale="log", xlabel="p (features)", title=f"r = {rank}")
        ax.set_xticks(sizes, [str(p) for p in sizes])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("fit wall time, s (1 BLAS thread)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle("fit_projection time against p, LFW (pixel subsets), two groups")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
