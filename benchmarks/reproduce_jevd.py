"""Reproduce Rathore & Manwani (JEVD fair PCA) Figure 1 / Appendix B on LSAC, with the group losses.

    .venv/bin/python benchmarks/reproduce_jevd.py [--repeats 3]

For every r = 1..d−1 and every method (``pca``, ``samadi-sdp``, ``fair-eig``, ``jevd``,
``jevd-orthogonal``, and the paper's own output: Algorithm 1's U with its columns left
unnormalised, "jevd (paper's U)"), the paper's metrics (spec seeds-000-001.md §B.4.3) on all
rows of the table, plus what the paper leaves out:

* R.E. = (1/n)‖X − XUUᵀ‖_F² about the global mean (for a non-orthonormal U, or a rank-relaxed
  map, tr Σ − ⟨Σ, 2P − P²⟩ with P = UUᵀ; :mod:`fairpca_dist.assessment.metrics`);
* V.E. = tr(UᵀΣU) / tr Σ, the paper's "Var(XU)/Var(X)" (bounded by 1 only for orthonormal U);
* MMD² = ‖Uᵀ(μ_female − μ_male)‖², the linear-kernel MMD of the projected groups;
* each group's Samadi loss and their maximum (the paper's own fairness criterion, never reported
  there; its Theorem 4.1 claims JEVD equalises them, which is false: spec B.6, fixture F1);
* the fit time (median of ``--repeats``; the paper's Table 1 gives one number per dataset).

Datasets (the paper's Diabetes, NPHA and Obesity are not in ../shared/data; LSAC is, twice):

* ``lsac`` — ``lsac_law_school/law_school_clean.csv`` (20,798 rows), gender (``male``) the group,
  all 12 columns as raw features: decile1b, decile3, lsat, ugpa, zfygpa, zgpa, fulltime,
  fam_inc, male, tier, race (White = 1), pass_bar. The paper does not state its preprocessing;
  this is the one that reproduces the shape of its StandardPCA column (which depends on the data
  only): d = 12 with r = 1..11, total variance ≈ 50 (paper ≈ 47.7), R.E. within 0.15 at every r
  and 0.02 at r = 11, and the jump of MMD² from ≈ 0.9 to ≈ 1.9 at r = 6, which is the
  component that carries ``male`` itself (variance 0.246, the sixth eigenvalue). So the paper
  kept the sensitive attribute among the features. Without it (``lsac_no_gender``) d is 11 and
  MMD² stays below 0.9.
* ``lsac_no_gender`` — the same table with ``male`` dropped and race one-hot coded: what a user
  would feed (R.E. is closer to the paper's for r ≤ 3, MMD² is not).
* ``lsac_pelegrina`` — ``pelegrina_fpca/lsac.csv`` (26,551 rows, the file the paper cites):
  sex (column 5) is the group; the other columns except the last (a 0/1 outcome) are the 10
  features, z-scored (Pelegrina's loaders' convention; raw, column 11's variance of 11,488
  would be the whole first component). Total variance 10 against ≈ 48: not the paper's data,
  shown for the methods' behaviour. Here the paper's Algorithm 1 diverges from U = I.

Every fit uses per-group covariances about each group's own mean (``center="group"``; the
paper's Σ_A, Σ_B). Writes ``results/jevd_lsac.{md,csv,png}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fairpca_dist import GroupMoments, fit_projection  # noqa: E402
from fairpca_dist.assessment import metrics
from fairpca_dist.solvers.jevd import faithful_jevd, jacobi_jd, select_columns  # noqa: E402

try:
    from provenance import provenance
except ImportError:  # run as a module
    from benchmarks.provenance import provenance

DATA = Path(os.environ.get("FAIRPCA_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
RESULTS = Path(__file__).resolve().parent / "results"
PAPERS_U = "jevd (paper's U)"
METHODS = ["pca", "samadi-sdp", "fair-eig", "jevd", "jevd-orthogonal", PAPERS_U]

# The paper's Table 4 (LSAC), verbatim (spec seeds-000-001.md §B.4.4): r -> (R.E., V.E., MMD²).
PAPER_LSAC = {
    "pca": [
        (17.64, 0.63, 0.83),
        (3.50, 0.93, 0.88),
        (2.31, 0.95, 0.92),
        (1.34, 0.97, 0.95),
        (0.65, 0.99, 0.97),
        (0.41, 0.99, 1.91),
        (0.27, 0.99, 1.93),
        (0.19, 1.00, 1.93),
        (0.12, 1.00, 1.93),
        (0.06, 1.00, 1.93),
        (0.02, 1.00, 1.93),
    ],
    "samadi-sdp": [
        (18.65, 0.61, 0.87),
        (3.91, 0.92, 0.87),
        (2.72, 0.94, 0.91),
        (1.73, 0.96, 0.95),
        (0.88, 0.98, 0.95),
        (0.56, 0.99, 1.05),
        (0.32, 0.99, 1.91),
        (0.21, 1.00, 1.92),
        (0.13, 1.00, 1.92),
        (0.07, 1.00, 1.91),
        (0.02, 1.00, 1.93),
    ],
    PAPERS_U: [
        (18.63, 0.61, 0.84),
        (4.05, 0.92, 0.84),
        (2.87, 0.94, 0.86),
        (1.87, 0.96, 0.89),
        (1.05, 0.98, 0.89),
        (0.71, 0.99, 0.92),
        (0.69, 0.99, 0.92),
        (0.59, 0.99, 0.92),
        (0.55, 0.99, 0.92),
        (0.47, 0.99, 0.92),
        (0.40, 0.99, 0.92),
    ],
}
PAPER_SECONDS_LSAC = {"pca": 0.3382, "samadi-sdp": 13.6891, PAPERS_U: 0.4644}  # Table 1, one number each


def _law_school() -> pd.DataFrame:
    return pd.read_csv(DATA / "lsac_law_school" / "law_school_clean.csv")


def load_lsac() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """law_school_clean.csv, all 12 columns as raw features (gender kept), groups by gender."""
    frame = _law_school()
    frame["race"] = (frame["race"] == "White").astype(np.float64)
    labels = np.where(frame["male"].to_numpy() == 1, "male", "female")
    return frame.to_numpy(np.float64), labels, list(frame.columns)


def load_lsac_no_gender() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """law_school_clean.csv without ``male``, race one-hot: 12 raw columns of rank 11."""
    frame = _law_school()
    features = pd.concat(
        [frame.drop(columns=["race", "male"]), pd.get_dummies(frame["race"], prefix="race", dtype=np.float64)], axis=1
    )
    labels = np.where(frame["male"].to_numpy() == 1, "male", "female")
    return features.to_numpy(np.float64), labels, list(features.columns)


def load_lsac_pelegrina() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Pelegrina's lsac.csv: columns 1–4 and 6–11 (sex = column 5 is the group), z-scored."""
    table = pd.read_csv(DATA / "pelegrina_fpca" / "lsac.csv", header=None).to_numpy(np.float64)
    names = ["zfygpa", "zgpa", "DOB_yr", "fulltime", "race", "tier", "fam_inc", "lsat", "ugpa", "score"]
    x = np.delete(table, [4, 11], axis=1)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    labels = np.where(table[:, 4] == 1, "male", "female")
    return x, labels, names


DATASETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray, list[str]]]] = {
    "lsac": load_lsac,
    "lsac_no_gender": load_lsac_no_gender,
    "lsac_pelegrina": load_lsac_pelegrina,
}


def papers_u(moments: GroupMoments, r: int) -> tuple[np.ndarray, dict]:
    """Algorithm 1 as the paper ran it (U = I start, no fallback) and its U as the paper used
    it: columns unnormalised, the r of them our default rule picks."""
    covariance = moments.covariance("group")
    found = faithful_jevd(covariance, fallback=False)
    chosen = select_columns(found.unit, covariance, r, "sum")
    return found.basis[:, chosen], {
        "status": "inaccurate" if found.diverged else "converged",
        "diverged": found.diverged,
        "n_iter": found.n_iter,
        "stop_reason": found.reason,
        "column_norm_spread": float(np.ptp(np.log10(np.linalg.norm(found.basis, axis=0)))),
    }


def early_stops(
    dataset: str = "lsac", stops: tuple[int, ...] = (1, 2, 5, 10, 20), ranks: tuple[int, ...] = (1, 6, 11)
) -> pd.DataFrame:
    """The paper's raw U after S_max = 1, 2, 5, … iterations (its S_max is not stated)."""
    x, labels, names = DATASETS[dataset]()
    moments = GroupMoments.from_arrays(x, labels, feature_names=names)
    pooled = GroupMoments.from_arrays(x, np.zeros(len(x), dtype=int), feature_names=names)
    covariance = moments.covariance("group")
    rows = []
    for stop in stops:
        found = faithful_jevd(covariance, fallback=False, max_iter=stop)
        for r in ranks:
            components = found.basis[:, select_columns(found.unit, covariance, r, "sum")]
            rows.append({"s_max": stop, "r": r, **evaluate(moments, pooled, components, r)})
    return pd.DataFrame(rows)


def fit(moments: GroupMoments, r: int, method: str) -> tuple[np.ndarray, dict]:
    if method == PAPERS_U:
        return papers_u(moments, r)
    result = fit_projection(moments, r, method=method, center="group")
    info = {
        "status": result.status,
        "n_iter": result.n_iter,
        "diverged": method.startswith("jevd") and result.status == "inaccurate",
    }
    if method.startswith("jevd"):
        info.update(
            max_column_cosine=result.certificate["max_column_cosine"],
            criterion=result.certificate["criterion"],
            selected=result.details["selected"],
            stop_reason=result.details["stop_reason"],
            init_used=result.details.get("init_used", ""),
        )
    return result.components, info


def evaluate(moments: GroupMoments, pooled: GroupMoments, components: np.ndarray, r: int) -> dict:
    """The paper's three metrics on all rows, and the per-group losses it omits."""
    losses = metrics.group_losses(moments, components, n_components=r, center="group")
    row = {
        "re": float(metrics.group_errors(pooled, components, center="global")[0]),
        "ve": float(metrics.explained_variance_ratio(pooled, components).sum()),
        "mmd2": float(metrics.mmd2_linear(moments, components)[0, 1]),
        "max_loss": float(losses.max()),
        "output_rank": components.shape[1],
        "column_norm_max": float(np.linalg.norm(components, axis=0).max()),
    }
    row.update({f"loss_{label}": float(value) for label, value in zip(moments.groups, losses, strict=True)})
    return row


def run(dataset: str, repeats: int) -> pd.DataFrame:
    x, labels, names = DATASETS[dataset]()
    moments = GroupMoments.from_arrays(x, labels, feature_names=names)
    pooled = GroupMoments.from_arrays(x, np.zeros(len(x), dtype=int), feature_names=names)
    rows = []
    for r in range(1, x.shape[1]):
        for method in METHODS:
            seconds = []
            for _ in range(repeats):
                started = time.perf_counter()
                components, info = fit(moments, r, method)
                seconds.append(time.perf_counter() - started)
            rows.append(
                {
                    "dataset": dataset,
                    "n_rows": len(x),
                    "n_features": x.shape[1],
                    "r": r,
                    "method": method,
                    **evaluate(moments, pooled, components, r),
                    "seconds": statistics.median(seconds),
                    "seconds_min": min(seconds),
                    "seconds_max": max(seconds),
                    **info,
                }
            )
        line = {m: f"{rows[-len(METHODS) + i]['max_loss']:.4g}" for i, m in enumerate(METHODS)}
        print(f"{dataset} r={r}: max loss " + ", ".join(f"{m} {v}" for m, v in line.items()), flush=True)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ report
def plot(table: pd.DataFrame) -> None:
    datasets = list(table["dataset"].unique())
    quantities = [("re", "R.E."), ("ve", "V.E."), ("mmd2", "MMD²"), ("max_loss", "max group loss")]
    fig, axes = plt.subplots(len(datasets), len(quantities), figsize=(16, 3.6 * len(datasets)), squeeze=False)
    styles = dict(zip(METHODS, ["o-", "s--", "^-", "v-", "D:", "x-."], strict=True))
    for i, dataset in enumerate(datasets):
        part = table[table["dataset"] == dataset]
        for j, (column, title) in enumerate(quantities):
            ax = axes[i, j]
            for method in METHODS:
                sub = part[part["method"] == method]
                values = sub[column].where(~sub["diverged"])  # a diverged run has no meaningful value
                ax.plot(sub["r"], values, styles[method], label=method, markersize=3.5, linewidth=1)
            # the scale of every method but the paper's raw U, whose values can be 1e13 (summary)
            shown = part[(part["method"] != PAPERS_U) & ~part["diverged"]][column]
            paper_top = (
                max(v[j] for values in PAPER_LSAC.values() for v in values)
                if dataset == "lsac" and column != "max_loss"
                else 0.0
            )
            top = max(shown.max(), paper_top)
            ax.set_ylim(0.0, 1.15 * top)  # losses of −1e−14 are rounding
            if dataset == "lsac" and column != "max_loss":
                for k, (method, values) in enumerate(PAPER_LSAC.items()):
                    ax.plot(
                        range(1, len(values) + 1),
                        [v[j] for v in values],
                        "+",
                        color=f"C{k + 5}",
                        markersize=8,
                        label=f"paper: {'JevdPCA' if method == PAPERS_U else method}",
                    )
            if column in ("re", "mmd2"):
                ax.set_yscale("symlog", linthresh=0.01)
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
            ax.set_title(f"{dataset}: {title}")
            ax.set_xlabel("r")
            if i == 0 and j in (0, 3):
                ax.legend(fontsize=6.5)
    fig.tight_layout()
    fig.savefig(RESULTS / "jevd_lsac.png", dpi=110)
    plt.close(fig)


def _pivot(part: pd.DataFrame, column: str) -> pd.DataFrame:
    return part.pivot(index="r", columns="method", values=column)[METHODS]


def summary(table: pd.DataFrame, rates: pd.DataFrame, stops: pd.DataFrame, repeats: int) -> str:
    lines = [
        "# Rathore & Manwani (JEVD fair PCA): Figure 1 / Appendix B on LSAC",
        "",
        f"`.venv/bin/python benchmarks/reproduce_jevd.py --repeats {repeats}` "
        f"({provenance(['fairpca_dist/solvers/jevd.py', 'benchmarks/reproduce_jevd.py'])}); "
        f"load average {os.getloadavg()[0]:.2f} at the end; 1 BLAS thread. Figure `jevd_lsac.png`, every number "
        '`jevd_lsac.csv`. Methods fitted with `center="group"`; metrics on all rows (spec §B.4.3): R.E. '
        "about the global mean, V.E. = tr(UᵀΣU)/tr Σ, MMD² = ‖Uᵀ(μ_female − μ_male)‖², and each group's "
        "Samadi loss. \"jevd (paper's U)\" is Algorithm 1's U with its columns unnormalised (how the paper "
        "evaluated it, spec §B.4.4 observation 3), the r columns chosen by our default rule.",
        "",
    ]
    lsac = table[table["dataset"] == "lsac"]
    lines += [
        "## Calibration: StandardPCA against the paper's Table 4",
        "",
        "The StandardPCA column depends on the data only, so it tests the preprocessing. Ours: "
        "law_school_clean.csv, 12 raw features (race one-hot), gender groups (module docstring).",
        "",
        "| r | paper R.E. | ours | paper V.E. | ours | paper MMD² | ours |",
        "|---|---|---|---|---|---|---|",
    ]
    pca = lsac[lsac["method"] == "pca"].set_index("r")
    for r, (re, ve, mmd) in enumerate(PAPER_LSAC["pca"], start=1):
        if r in pca.index:
            lines.append(
                f"| {r} | {re:.2f} | {pca.loc[r, 're']:.2f} | {ve:.2f} | {pca.loc[r, 've']:.2f} | "
                f"{mmd:.2f} | {pca.loc[r, 'mmd2']:.2f} |"
            )
    paper_re = np.array([v[0] for v in PAPER_LSAC["pca"]])
    paper_ve = np.array([v[1] for v in PAPER_LSAC["pca"]])
    ours = pca.loc[1 : len(paper_re)]
    lines += [
        "",
        f"Largest difference: R.E. {np.abs(ours['re'].to_numpy() - paper_re).max():.3f}, "
        f"V.E. {np.abs(ours['ve'].to_numpy() - paper_ve).max():.3f}; total variance (R.E. at r = 0) "
        f"{pca.loc[1, 're'] / (1 - pca.loc[1, 've']):.1f} against the paper's ≈ 47.7 "
        "(17.64 / (1 − 0.63)).",
        "",
    ]
    lines += _method_tables(lsac, stops)
    lines += divergence_summary(rates)
    for dataset in table["dataset"].unique():
        part = table[table["dataset"] == dataset]
        lines += [
            f"## {dataset}: every method, every r (n = {part['n_rows'].iloc[0]}, d = {part['n_features'].iloc[0]})",
            "",
        ]
        for column, title in [
            ("re", "R.E."),
            ("ve", "V.E."),
            ("mmd2", "MMD²"),
            ("max_loss", "max group loss"),
            ("seconds", "fit seconds (median)"),
        ]:
            pivot, diverged = _pivot(part, column), _pivot(part, "diverged").astype(bool)
            lines += [f"{title}:", "", "| r | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 1) + "|"]
            lines += [
                f"| {r} | "
                + " | ".join(
                    "diverged" if diverged.loc[r, m] and column != "seconds" else f"{pivot.loc[r, m]:.4g}"
                    for m in METHODS
                )
                + " |"
                for r in pivot.index
            ]
            lines.append("")
        lines += _checks(part)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------ divergence of the U = I start
def random_pair(kind: str, d: int, seed: int) -> np.ndarray:
    """Two random d × d group covariances: ``"wishart"`` AAᵀ + diag(U(0, 5)), A standard normal;
    ``"correlation"`` the same AAᵀ scaled to unit diagonal, then jittered by diag(U(−0.1, 0.1))
    (z-scored features: off-diagonals large against the diagonal gaps)."""
    rng = np.random.default_rng(seed)
    pair = []
    for _ in range(2):
        half = rng.normal(size=(d, d))
        c = half @ half.T
        if kind == "wishart":
            c = c + np.diag(rng.uniform(0.0, 5.0, d))
        else:
            s = 1.0 / np.sqrt(np.diag(c))
            c = c * s[:, None] * s[None, :] + np.diag(rng.uniform(-0.1, 0.1, d))
        pair.append(c)
    return np.stack(pair)


def divergence_rates(seeds: int) -> pd.DataFrame:
    """How often Algorithm 1 from U = I (the paper) fails, and whether ``jevd``'s default recovers."""
    rows = []
    for kind in ("wishart", "correlation"):
        for d in (5, 10, 20):
            for seed in range(seeds):
                matrices = random_pair(kind, d, seed)
                paper = faithful_jevd(matrices, fallback=False)
                ours = faithful_jevd(matrices)
                jacobi = jacobi_jd(matrices).history[-1]
                rows.append(
                    {
                        "kind": kind,
                        "d": d,
                        "seed": seed,
                        "paper_diverged": paper.diverged,
                        "paper_stop": paper.reason,
                        "paper_vs_jacobi": paper.orthogonal_criterion(matrices) / jacobi,
                        "ours_fallback": ours.fallback_reason,
                        "ours_diverged": ours.diverged,
                        "ours_vs_jacobi": ours.orthogonal_criterion(matrices) / jacobi,
                    }
                )
    return pd.DataFrame(rows)


def divergence_summary(rates: pd.DataFrame) -> list[str]:
    lines = [
        "## Algorithm 1 from U = I diverges on generic inputs",
        "",
        f"Random pairs (`random_pair` in the script: {rates['seed'].nunique()} seeds per row). "
        '"Diverged": ended on a singular step, or with unit columns that diagonalise worse than U = I '
        "(Σ_g ‖offdiag(ŪᵀΣ_gŪ)‖² above C_0). The ratio is that criterion over the Jacobi (jevd-orthogonal) "
        "optimum's: 1 means the same joint diagonaliser.",
        "",
        "| inputs | d | paper (U = I, no fallback): diverged | of which singular step | paper / Jacobi, median | "
        "`jevd` default: restarted | diverged | within 1e-6 of Jacobi |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (kind, d), part in rates.groupby(["kind", "d"], sort=False):
        n = len(part)
        lines.append(
            f"| {kind} | {d} | {int(part['paper_diverged'].sum())}/{n} | "
            f"{int((part['paper_stop'] == 'singular_step').sum())} | {part['paper_vs_jacobi'].median():.3g} | "
            f"{int((part['ours_fallback'] != '').sum())}/{n} | {int(part['ours_diverged'].sum())}/{n} | "
            f"{int((part['ours_vs_jacobi'] <= 1 + 1e-6).sum())}/{n} |"
        )
    return lines + [
        "",
        "Where `jevd` is not within 1e-6 of Jacobi and did not diverge, both reached a stationary "
        "point of the orthogonal criterion and the ratio shows which is lower (JD has local optima).",
        "",
    ]


def _method_tables(lsac: pd.DataFrame, stops: pd.DataFrame) -> list[str]:
    lines = [
        "## Fair methods against the paper's Table 4 (LSAC)",
        "",
        "R.E. / V.E. / MMD² per r.",
        "",
        "| r | paper SDP_LP | samadi-sdp | paper JevdPCA | jevd | jevd-orthogonal | jevd (paper's U) |",
        "|---|---|---|---|---|---|---|",
    ]
    by = {m: lsac[lsac["method"] == m].set_index("r") for m in METHODS}

    def three(values: tuple[float, float, float] | pd.Series) -> str:
        re, ve, mmd = (values["re"], values["ve"], values["mmd2"]) if isinstance(values, pd.Series) else values
        return " / ".join(f"{v:.2f}" if abs(v) < 1e4 else f"{v:.1e}" for v in (re, ve, mmd))

    for r in range(1, len(PAPER_LSAC["pca"]) + 1):
        lines.append(
            f"| {r} | {three(PAPER_LSAC['samadi-sdp'][r - 1])} | {three(by['samadi-sdp'].loc[r])} | "
            f"{three(PAPER_LSAC[PAPERS_U][r - 1])} | {three(by['jevd'].loc[r])} | "
            f"{three(by['jevd-orthogonal'].loc[r])} | {three(by[PAPERS_U].loc[r])} |"
        )
    seconds = lsac.groupby("method")["seconds"].sum()
    pca, fair = by["pca"], by["fair-eig"]
    spread = by[PAPERS_U]["column_norm_spread"].iloc[0]
    jump = int(pca.index[pca["mmd2"].diff() > 0.5][0])
    lines += [
        "",
        "Training time, summed over r = 1..11 (fits from moments; the one pass over the rows that "
        "builds them is not included): "
        + ", ".join(
            f"{m} {seconds[m]:.3f} s" + (f" (paper: {PAPER_SECONDS_LSAC[m]:.2f} s)" if m in PAPER_SECONDS_LSAC else "")
            for m in METHODS
        )
        + ".",
        "",
        "### The differences, explained",
        "",
        "1. **Preprocessing.** The paper states none. The calibration above is the closest we found (the "
        "paper's ≈ 27,000 students suggest a slightly different row set: this table has 20,798, and the "
        "26,551-row file it cites has other columns, with a total variance that cannot give 47.7). "
        "Differences below of the size of the calibration's (R.E. ≤ 0.15, MMD² ≈ 0.08) are the data's.",
        f"2. **Gender is a feature and the group.** PCA's MMD² jumps by ≈ 1 at r = {jump}, where the "
        "component carrying the `male` column enters (the paper: r = 6). Centred per group, that column "
        "has zero variance in each group, so every group-centred fair method gives it no weight: "
        f"`samadi-sdp`, `fair-eig`, `jevd` and `jevd-orthogonal` keep MMD² ≤ {fair['mmd2'].max():.2f} at "
        f"every r, and their R.E. exceeds PCA's from r = {jump} on ({fair.loc[jump, 're']:.2f} vs "
        f'{pca.loc[jump, "re"]:.2f}; the paper: SDP_LP 0.56 vs 0.41). The paper\'s "huge gap" in MMD² '
        "for JevdPCA on LSAC is this effect, which our `samadi-sdp` and `fair-eig` show too; the paper's "
        "SDP_LP jumps at r = 7, so its fit saw the column's variance (e.g. centred about the global mean).",
        "3. **The paper's JevdPCA numbers are not Algorithm 1's raw U.** Run to convergence from U = I "
        f"(it converges here: `jevd`, the same run, reports unit columns orthogonal to "
        f"{by['jevd']['max_column_cosine'].max():.0e}), Algorithm 1's columns have norms spread over "
        f"{spread:.1f} orders of magnitude, so the unnormalised U gives R.E. up to "
        f"{by[PAPERS_U]['re'].max():.1e} (last column). Stopping early does not bring it near the paper's "
        "values either: R.E. at r = 1 / 6 / 11 after S_max iterations is "
        + "; ".join(f"{stop}: " + " / ".join(f"{v:.3g}" for v in part["re"]) for stop, part in stops.groupby("s_max"))
        + " (paper: 18.63 / 0.71 / 0.40). Our `jevd` normalises the "
        "columns and equals `jevd-orthogonal` here. The paper's R.E. floor (0.40 at r = 11) and V.E. "
        "above PCA's elsewhere (observation 3 of spec §B.4.4) need a U that is neither converged nor "
        "orthonormal; its S_max, stopping rule and column normalisation are not stated, so its numbers "
        "cannot be regenerated.",
        "4. **Times.** Ours are fits from the moments on 1 BLAS thread (milliseconds); the paper's "
        "Table 1 gives one number per method and dataset, hardware unstated (spec: probably summed over r "
        "with data handling included). Ratio `samadi-sdp` / `jevd`: "
        f"ours {seconds['samadi-sdp'] / seconds['jevd']:.1f}×, "
        f"the paper's {PAPER_SECONDS_LSAC['samadi-sdp'] / PAPER_SECONDS_LSAC[PAPERS_U]:.1f}×.",
        "5. **Fairness.** The paper reports no group losses. `jevd`'s max group loss is above the fair "
        "optimum (`fair-eig`) at most r of every table below, although Theorem 4.1 claims C(U) = 0 "
        "equalises the losses: it does not (spec B.6, fixture F1).",
        "",
    ]
    return lines


def _checks(part: pd.DataFrame) -> list[str]:
    """Facts that must hold whatever the preprocessing (spec §B.4.4 observations 2–4, B.6)."""
    re, loss, ve = _pivot(part, "re"), _pivot(part, "max_loss"), _pivot(part, "ve")
    orthonormal = [m for m in METHODS if m not in (PAPERS_U, "samadi-sdp")]
    pca_lowest = bool((re[orthonormal].min(axis=1) >= re["pca"] - 1e-9).all())
    fair_best = bool((loss["fair-eig"] <= loss.drop(columns=["fair-eig"]).min(axis=1) + 1e-6).all())
    jevd_worse = int((loss["jevd"] > loss["fair-eig"] + 1e-6).sum())
    ve_above = int((ve[PAPERS_U] > ve["pca"] + 1e-9).sum())
    return [
        f"Checks: PCA has the lowest R.E. among the orthonormal rank-r methods at every r: "
        f"{'yes' if pca_lowest else 'NO'}; `fair-eig` has the smallest max group loss at every r: "
        f"{'yes' if fair_best else 'NO'}; `jevd`'s max loss is above the fair optimum at {jevd_worse} of "
        f"{len(loss)} r (Theorem 4.1 would make it equal); the paper's unnormalised U has V.E. above PCA's at "
        f"{ve_above} of {len(ve)} r (impossible for an orthonormal U).",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fits per (method, r); the median time is reported")
    parser.add_argument("--seeds", type=int, default=100, help="random pairs per row of the divergence table")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    table = pd.concat([run(dataset, args.repeats) for dataset in DATASETS], ignore_index=True)
    table.to_csv(RESULTS / "jevd_lsac.csv", index=False, float_format="%.10g")
    rates = divergence_rates(args.seeds)
    rates.to_csv(RESULTS / "jevd_divergence.csv", index=False, float_format="%.10g")
    plot(table)
    (RESULTS / "jevd_lsac.md").write_text(summary(table, rates, early_stops(), args.repeats))
    print((RESULTS / "jevd_lsac.md").read_text())


if __name__ == "__main__":
    main()
