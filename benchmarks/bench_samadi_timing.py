"""Time samadi-sdp vs samadi-mw vs fair-eig on the same two-group problems, p = 20 … 1764.

    .venv/bin/python benchmarks/bench_samadi_timing.py [--r 5] [--sdp-max-p 200]

Problems: LFW faces (pixels / 255, female vs male, each group centred by its own mean)
restricted to p evenly spaced pixels, p ∈ {20, 50, 100, 200, 500, 1764}; r = 5. Every solver
gets the same GroupMoments; times are the best of 3 ``fit_projection`` calls (SDP: 1 call
above p = 100). The SDP is skipped above ``--sdp-max-p`` (its cost grows like p^6.5; SCS took
3.7 s at p = 200 in spec/stack.md §6). Writes benchmarks/results/samadi_timing.{md,csv}.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fairpca_dist import GroupMoments, fit_projection  # noqa: E402

DATA = Path(os.environ.get("FAIRPCA_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (20, 50, 100, 200, 500, 1764)


def timed(moments: GroupMoments, r: int, method: str, repeats: int) -> tuple[float, float, float]:
    best_time, result = np.inf, None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fit_projection(moments, r, method=method, **({} if method == "samadi-sdp" else {"tol": 1e-6}))
        best_time = min(best_time, time.perf_counter() - started)
    assert result is not None
    gap = result.certificate.get("upper_bound", np.nan) - result.certificate.get("lower_bound", np.nan)
    return best_time, float(result.group_loss.max()), float(gap)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--r", type=int, default=5)
    parser.add_argument("--sdp-max-p", type=int, default=200)
    args = parser.parse_args()
    images = np.load(DATA / "lfw_samadi" / "lfw_images_49x36.npz")["images"].astype(np.float64) / 255.0
    labels = np.where(np.loadtxt(DATA / "lfw_samadi" / "sex.txt").astype(int) == 1, "male", "female")
    full = GroupMoments.from_arrays(images, labels)
    rows = []
    for p in SIZES:
        columns = np.unique(np.linspace(0, images.shape[1] - 1, p).round().astype(int))
        moments = GroupMoments.from_arrays(images[:, columns], labels) if p < images.shape[1] else full
        row = {"p": p}
        for method in ("fair-eig", "samadi-mw", "samadi-sdp"):
            if method == "samadi-sdp" and p > args.sdp_max_p:
                row.update({f"{method} s": np.nan, f"{method} max loss": np.nan})
                continue
            repeats = 1 if (method == "samadi-sdp" and p > 100) or p > 1000 else 3
            seconds, value, gap = timed(moments, args.r, method, repeats)
            row.update({f"{method} s": seconds, f"{method} max loss": value, f"{method} gap": gap})
        rows.append(row)
        print(row, flush=True)
    table = pd.DataFrame(rows)
    table["mw / fair-eig"] = table["samadi-mw s"] / table["fair-eig s"]
    table["sdp / fair-eig"] = table["samadi-sdp s"] / table["fair-eig s"]
    RESULTS.mkdir(exist_ok=True)
    table.to_csv(RESULTS / "samadi_timing.csv", index=False, float_format="%.6g")
    lines = [
        "# Samadi solvers: time per fit vs number of features",
        "",
        f"`.venv/bin/python benchmarks/bench_samadi_timing.py --r {args.r}`: LFW pixels subsets, two groups, "
        f"r = {args.r}, tol 1e-6 for the iterative solvers, best of 3 (1 run for the SDP above p = 100 and "
        f"for p = 1764). SDP skipped above p = {args.sdp_max_p}.",
        "",
        "| p | fair-eig s | samadi-mw s | samadi-sdp s |"
        " mw / fair-eig | sdp / fair-eig | max loss (fair-eig / mw / sdp) |",
        "|---|---|---|---|---|---|---|",
    ]

    def cell(value: float, spec: str) -> str:
        return "–" if np.isnan(value) else format(value, spec)

    for _, row in table.iterrows():
        lines.append(
            f"| {int(row['p'])} | {row['fair-eig s']:.3f} | {row['samadi-mw s']:.3f} | "
            f"{cell(row['samadi-sdp s'], '.2f')} | {row['mw / fair-eig']:.1f} | {cell(row['sdp / fair-eig'], '.0f')} | "
            f"{row['fair-eig max loss']:.6f} / {row['samadi-mw max loss']:.6f} / "
            f"{cell(row['samadi-sdp max loss'], '.6f')} |"
        )
    (RESULTS / "samadi_timing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
