"""Where the time of ``GroupMoments.from_codes`` goes on one 100k x 50 chunk (4 groups).

Run (~30 s)::

    .venv/bin/python benchmarks/profile_kernel.py

One chunk of 100,000 x 50 float64 with 4 groups of 50/30/15/5 %, 1 BLAS thread (what each
dask task gets). Best of 5 wall times, in ms, for:

* ``from_codes`` on a C-ordered chunk (what numpy/dask-array input gives) and on the same
  chunk in Fortran order (what ``DataFrame.to_numpy()`` gives for Parquet/pandas input);
* its pieces, re-done with plain numpy: label sort, gathering the rows of each group
  (``np.take`` on C and F order), shifting and summing, the ``syrk``/``X.T @ X`` products;
* reference points: ungrouped ``X.T @ X`` on the chunk and the naive mask loop;
* the top functions of a cProfile of ``from_codes`` on the F-ordered chunk;
* parallel scaling over 20 such chunks (2M rows), on 1 thread and on a 2-thread pool (what
  dask's threaded scheduler does here): ``from_codes``, ungrouped ``X.T @ X``, and the Gram
  accumulation alone with scipy's ``dsyrk`` (an f2py wrapper), numpy's ``blk.T @ blk`` and the
  kernel's compiled ``accumulate_rows`` (sums, then the same dsyrk through its function pointer,
  in place, GIL released);
* the kernel against ``X.T @ X`` on the same chunk at p = 10 … 2000 (2 groups 70 / 30 %
  shuffled, the same rows sorted by group, one group), in CPU seconds of the calling thread
  (``time.thread_time``: what the work costs, whatever other processes do to the wall clock on
  a shared machine), 1 BLAS thread each: like with like, one core against one core.

Writes results/profile_kernel.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import cProfile
import io
import pstats
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
from provenance import commit
from scipy.linalg.blas import dsyrk
from threadpoolctl import threadpool_limits

from fairpca_dist.engine.gram import accumulate_groups, accumulate_rows
from fairpca_dist.engine.moments import GroupMoments

RESULTS = Path(__file__).resolve().parent / "results"
SHARES = (0.50, 0.30, 0.15, 0.05)


def best_ms(fn, repeat: int = 5, clock=time.perf_counter) -> float:
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return 1e3 * min(times)


FEATURES = (10, 20, 50, 200, 500, 1000, 2000)


def kernel_vs_gram(rng: np.random.Generator) -> list[tuple[int, int, float, float, float, float]]:
    """(p, rows, X.T @ X, kernel shuffled, sorted, one group) in CPU ms of this thread, best of 3."""
    out = []
    for p in FEATURES:
        n = 100_000 if p <= 200 else 20_000
        x = rng.standard_normal((n, p)) + 3.0
        codes = (rng.random(n) >= 0.7).astype(np.intp)
        ordered = np.sort(codes)
        single = np.zeros(n, dtype=np.intp)
        timed = [best_ms(partial(np.matmul, x.T, x), 3, time.thread_time)] + [
            best_ms(partial(GroupMoments.from_codes, x, c, groups), 3, time.thread_time)
            for c, groups in ((codes, (0, 1)), (ordered, (0, 1)), (single, (0,)))
        ]
        out.append((p, n, *timed))
        print(f"p = {p}: " + ", ".join(f"{t:.1f}" for t in timed), flush=True)
    return out


def compiled_rows(x: np.ndarray) -> np.ndarray:
    """The kernel's compiled loop over the rows in place: sums, then dsyrk per 1024-row block."""
    gram = np.zeros((x.shape[1], x.shape[1]))
    accumulate_rows(x, None, 0, x.shape[0], None, None, 1024, np.empty((1024, x.shape[1])), gram, np.zeros(x.shape[1]))
    return gram


def each(fn, items) -> None:
    """Run ``fn`` on every item, dropping each result at once (as the kernel does)."""
    for item in items:
        fn(item)


def scipy_syrk(block: np.ndarray, gram: np.ndarray) -> np.ndarray:
    return dsyrk(1.0, block.T, beta=1.0, c=gram, trans=0, lower=0, overwrite_c=1)


def numpy_syrk(block: np.ndarray, gram: np.ndarray) -> np.ndarray:
    gram += block.T @ block  # numpy dispatches this to BLAS syrk too
    return gram


def syrk_blocks(x: np.ndarray, syrk, order: str = "F") -> np.ndarray:
    gram = np.zeros((x.shape[1], x.shape[1]), order=order)
    for i in range(0, x.shape[0], 1024):
        gram = syrk(x[i : i + 1024], gram)
    return gram


def main() -> None:
    rng = np.random.default_rng(0)
    n, d = 100_000, 50
    codes = rng.choice(len(SHARES), size=n, p=SHARES).astype(np.intp)
    x = rng.standard_normal((n, d)) + 3.0
    xf = np.asfortranarray(x)
    groups = tuple(range(len(SHARES)))
    order = np.argsort(codes, kind="stable")
    per_group = [order[codes[order] == g] for g in groups]
    masks = [codes == g for g in groups]
    blocks = [idx[i : i + 1024] for idx in per_group for i in range(0, len(idx), 1024)]
    buf = np.empty((1024, d))
    gathered, zero, gram = [x[b] for b in blocks], np.zeros(d), np.zeros((d, d), order="F")

    rows = [
        ("from_codes, C-ordered chunk", lambda: GroupMoments.from_codes(x, codes, groups)),
        (
            "from_codes, F-ordered chunk (as from DataFrame.to_numpy)",
            lambda: GroupMoments.from_codes(xf, codes, groups),
        ),
        ("label sort: argsort(stable) + bincount", lambda: (np.argsort(codes, kind="stable"), np.bincount(codes))),
        (
            "sweep: accumulate_groups (each row copied into its group's block; sums + dsyrk per block)",
            lambda: accumulate_groups(
                x, codes, None, 1024, 50.0, np.zeros((len(groups), d, d)), np.zeros((len(groups), d))
            ),
        ),
        (
            f"gather: np.take(x_C, idx, axis=0), {len(blocks)} blocks of <= 1024 rows",
            lambda: each(lambda b: np.take(x, b, axis=0), blocks),
        ),
        (
            "gather: np.take(x_F, idx, axis=0), first 10 blocks only",
            lambda: each(lambda b: np.take(xf, b, axis=0), blocks[:10]),
        ),
        ("gather: x_F[idx] (fancy indexing), all blocks", lambda: each(lambda b: xf[b], blocks)),
        (
            "gather: np.take(x_C, ..., out=reused buffer), all blocks",
            lambda: each(lambda b: np.take(x, b, axis=0, out=buf[: len(b)]), blocks),
        ),
        (
            "in-place shift + column sums of the (pre-gathered) blocks",
            lambda: [(np.subtract(blk, zero, out=blk), blk.sum(axis=0)) for blk in gathered],
        ),
        (
            "dsyrk into one p x p accumulator, per (pre-gathered) block",
            lambda: [dsyrk(1.0, blk.T, beta=1.0, c=gram, trans=0, lower=0, overwrite_c=1) for blk in gathered],
        ),
        ("blk.T @ blk per (pre-gathered) block", lambda: each(lambda blk: blk.T @ blk, gathered)),
        ("reference: ungrouped x.T @ x on the chunk", lambda: x.T @ x),
        ("reference: mask loop xg = x[mask]; xg.T @ xg", lambda: each(lambda m: (lambda xg: xg.T @ xg)(x[m]), masks)),
        ("reference: full C copy of the F-ordered chunk", lambda: np.ascontiguousarray(xf)),
    ]
    with threadpool_limits(limits=1, user_api="blas"):
        timings = [(name, best_ms(fn)) for name, fn in rows]
        profile = cProfile.Profile()
        profile.enable()
        GroupMoments.from_codes(xf, codes, groups)
        profile.disable()
        # 20 chunks (views of one 2M-row array) on one thread, then on a pool of 2 threads
        big = np.concatenate([x] * 20)
        big_codes = np.concatenate([codes] * 20)
        parts = [(big[i : i + n], big_codes[i : i + n]) for i in range(0, 20 * n, n)]
        scaling = []
        with ThreadPoolExecutor(2) as pool:
            for name, fn in (
                ("from_codes", lambda c: GroupMoments.from_codes(c[0], c[1], groups)),
                ("ungrouped X.T @ X", lambda c: c[0].T @ c[0]),
                ("scipy dsyrk over 1024-row blocks", lambda c: syrk_blocks(c[0], scipy_syrk)),
                ("numpy blk.T @ blk over 1024-row blocks", lambda c: syrk_blocks(c[0], numpy_syrk)),
                ("accumulate_rows (compiled; sums + dsyrk) over 1024-row blocks", lambda c: compiled_rows(c[0])),
            ):
                serial = best_ms(lambda fn=fn: each(fn, parts), 3)
                threads = best_ms(lambda fn=fn: list(pool.map(fn, parts)), 3)
                scaling.append((name, serial, threads))
        by_features = kernel_vs_gram(rng)
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(8)
    stats = "\n".join(line for line in text.getvalue().splitlines() if line.strip())

    measured = commit()
    lines = [
        "# profile_kernel: GroupMoments.from_codes on one 100k x 50 chunk, 4 groups, 1 BLAS thread",
        "",
        f"`.venv/bin/python benchmarks/profile_kernel.py` at {measured}, best of 5, "
        f"load average at end {os.getloadavg()[0]:.2f}.",
        "",
        "| step | ms |",
        "|---|---|",
        *(f"| {name} | {ms:.2f} |" for name, ms in timings),
        "",
        "Parallel scaling over 20 chunks of 100k x 50 (2M rows), 1 BLAS thread per task:",
        "",
        "| kernel | 1 thread, ms | 2 threads, ms | speed-up |",
        "|---|---|---|---|",
        *(f"| {name} | {a:.0f} | {b:.0f} | {a / b:.2f} |" for name, a, b in scaling),
        "",
        "The kernel against the ungrouped Gram of the same chunk, CPU ms of the calling thread (best of 3), "
        "1 BLAS thread each; 2 groups 70 / 30 % shuffled (gathered per group), the same rows sorted by "
        "group (a slice per group, read in place), and one group:",
        "",
        "| p | rows | X.T @ X ms | shuffled ms (ratio) | sorted by group ms (ratio) | one group ms (ratio) |",
        "|---|---|---|---|---|---|",
        *(
            f"| {p} | {n:,} | {g:.1f} | {a:.1f} ({a / g:.2f}) | {b:.1f} ({b / g:.2f}) | {c:.1f} ({c / g:.2f}) |"
            for p, n, g, a, b, c in by_features
        ),
        "",
        "cProfile of one `from_codes` call on the F-ordered chunk (top by own time):",
        "",
        "```",
        stats,
        "```",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "profile_kernel.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
