"""Reproduce Vu et al. (distributionally robust fair PCA, ICLR 2022) Tables 1 and 3 and the
Pareto figure (Fig. 2) with the library's evaluation protocol, from one pass per dataset.

    .venv/bin/python benchmarks/reproduce_dro.py [--datasets "Default Credit" Biodeg ...]
        [--splits 10] [--pareto-runs 5] [--blas-threads 1]

Protocol (paper §5, spec/seeds-002-003.md §B.8 protocol 3): r = 3, 30 % train / 70 % test,
the hyper-parameters of each method chosen by 3-fold cross-validation on the training part
minimising ABDiff + ARE, mean over 10 splits. Here: ``compute_moments(frame, cells=HashCells(
("id",), 10))`` (one pass: rows hashed into 10 cells), then ``fairpca_dist.assessment.evaluation.evaluate``
with ``center="global"`` (the paper's zero-mean M̂_a) and ``standardize=True`` (each fit z-scored
with its training rows' mean and ddof-0 std, as the authors' code does). A split takes 3 of the
10 cells for training; each fold is one of them.

Methods: ``dro`` (the paper's RFPCA: ``algorithm="subgradient"``, its Algorithm 1; grid
α ∈ {0.05, 0.1, 0.15} × λ ∈ {0, 0.5, …, 2.5}, 20 restarts, τ = 1000), ``pca``, ``samadi-mw``
(the paper's FairPCA baseline, but run to its certified optimum with LP rounding; its η is a
step size, so there is no grid), ``fair-eig`` (the exact two-group optimum of the same min-max
loss) and ``mm`` (max-min group variance, Babu et al.). CFPCA (Olfat & Aswani) is not in this library.

Paper columns: RFPCA and FairPCA of Tables 1 (out of sample) and 3 (in sample). Differences to
expect, each explained in the Markdown: splits are unions of hash cells, not the authors'
per-group stratified row splits; the authors' ABDiff is computed about each group's own mean
(our ``ABDiff (own means)`` column) while ours is about the training mean the model centres
with; their FairPCA is MW stopped after 1000 steps, ours is certified.

Pareto (Fig. 2, protocol 1): Default Credit, r = 3, the whole table for fitting and scoring,
every grid point of ``dro`` and the single point of each other method, mean over
``--pareto-runs`` seeds (the solvers' random starts).

Writes benchmarks/results/: ``dro_table1.md``, ``dro_table1.csv`` (one row per dataset, method
and split), ``dro_pareto.png``, ``dro_pareto.csv``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from datasets_paper import DRO_DATASETS, features_of, load_dro_dataset  # noqa: E402
from provenance import provenance  # noqa: E402

from fairpca_dist import HashCells, compute_moments, fit_projection  # noqa: E402
from fairpca_dist.assessment.evaluation import PAPER_GRIDS, evaluate  # noqa: E402
from fairpca_dist.assessment.scoring import score_projection  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
METHODS = ("dro", "pca", "samadi-mw", "fair-eig", "mm")
# the paper's RFPCA: its Algorithm 1 (the library's default for two groups is the certified frontier,
# which reaches the same objective on Default Credit: results/dro_speed.md)
DRO_PAPER = {"algorithm": "subgradient"}
N_COMPONENTS = 3

#: Paper Table 1 (out of sample) and Table 3 (in sample): (RFPCA ABDiff, RFPCA ARE, FairPCA
#: ABDiff, FairPCA ARE), spec/seeds-002-003.md §B.8.
PAPER = {
    "test": {
        "Default Credit": (0.9483, 10.3995, 1.4401, 10.4439),
        "Biodeg": (23.0066, 33.8571, 27.5159, 34.6184),
        "E. Coli": (1.1500, 1.7210, 1.5280, 2.4799),
        "Energy": (0.0125, 0.2238, 0.0138, 0.2225),
        "German Credit": (2.0588, 43.9032, 1.3670, 44.0064),
        "Image": (0.7522, 6.0199, 1.6129, 10.2616),
        "Letter": (0.1712, 7.4176, 1.2489, 7.4470),
        "Magic": (1.8314, 3.9094, 2.9405, 3.3815),
        "Parkinsons": (0.3273, 5.0597, 0.8678, 4.9044),
        "SkillCraft": (0.7669, 8.2828, 0.7771, 8.2494),
        "Statlog": (0.0838, 3.0998, 0.3356, 7.9734),
        "Steel": (1.1472, 12.5944, 1.2208, 12.3096),
        "Taiwan Credit": (0.5523, 10.9845, 0.5710, 10.9415),
        "Wine Quality": (0.6359, 4.2801, 0.3046, 6.0936),
    },
    "train": {
        "Default Credit": (0.9457, 9.9072, 1.5821, 9.9049),
        "Biodeg": (9.4093, 23.1555, 14.2587, 23.8227),
        "E. Coli": (0.5678, 1.4804, 0.9191, 2.0840),
        "Energy": (0.0094, 0.2295, 0.0153, 0.2273),
        "German Credit": (1.6265, 40.1512, 2.9824, 40.3393),
        "Image": (0.1320, 5.0924, 0.7941, 9.0437),
        "Letter": (0.1121, 7.4088, 1.2560, 7.4375),
        "Magic": (1.7405, 3.8766, 2.8679, 3.3500),
        "Parkinsons": (0.1238, 5.0471, 0.6702, 4.8760),
        "SkillCraft": (0.4231, 8.1569, 0.5576, 8.1096),
        "Statlog": (0.1972, 3.0588, 0.3315, 7.9980),
        "Steel": (0.6943, 11.0396, 1.8015, 10.7653),
        "Taiwan Credit": (1.1516, 10.5136, 1.3362, 10.4478),
        "Wine Quality": (0.1125, 4.1491, 0.1705, 5.8999),
    },
}


MEASURED = ["fairpca_dist/assessment/evaluation.py", "fairpca_dist/solvers/dro.py"]


def run_dataset(name: str, n_splits: int) -> tuple[pd.DataFrame, dict]:
    """One pass for the cell moments, then the whole protocol on the driver."""
    frame = load_dro_dataset(name)
    started = time.perf_counter()
    cells = compute_moments(
        frame, sensitive_feature="s", features=features_of(frame), cells=HashCells(("id",), n_cells=10, seed=0)
    )
    pass_seconds = time.perf_counter() - started
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        methods = {m: {**PAPER_GRIDS[m], **DRO_PAPER} if m == "dro" else None for m in METHODS}
        evaluation = evaluate(
            cells,
            N_COMPONENTS,
            methods,
            n_splits=n_splits,
            train_fraction=0.3,
            n_folds=3,
            center="global",
            standardize=True,
            random_state=0,
        )
    table = evaluation.table()
    table.insert(0, "dataset", name)
    info = {
        "rows": len(frame),
        "features": len(features_of(frame)),
        "pass_seconds": pass_seconds,
        "seconds": evaluation.seconds,
        "fits": int(table["fits"].sum()),
        "per_method_seconds": table.groupby("method")["seconds"].sum().to_dict(),
        "warnings": len(caught),
        "dro_params": table[table["method"] == "dro"]["params"].value_counts().to_dict(),
    }
    return table, info


def _mean(table: pd.DataFrame, name: str, method: str, column: str) -> float:
    part = table[(table["dataset"] == name) & (table["method"] == method)]
    return float(part[column].mean())


def results_table(table: pd.DataFrame, names: list[str], side: str) -> list[str]:
    """The paper's layout: ours (dro, samadi-mw, fair-eig, pca, mm) beside the paper's RFPCA and
    FairPCA; bold = our lowest per dataset and criterion among the fair methods and PCA."""
    head = (
        "| dataset | dro ABDiff | dro ABDiff (own means) | dro ARE | samadi-mw ABDiff | samadi-mw ARE | "
        "fair-eig ABDiff | fair-eig ARE | pca ABDiff | pca ARE | mm ABDiff | mm ARE | "
        "paper RFPCA ABDiff | paper RFPCA ARE | paper FairPCA ABDiff | paper FairPCA ARE |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name in names:
        values = {m: (_mean(table, name, m, f"{side}_abdiff"), _mean(table, name, m, f"{side}_are")) for m in METHODS}
        best = [min(v[i] for v in values.values()) for i in (0, 1)]

        def cell(m: str, i: int, values: dict[str, tuple[float, float]] = values, best: list[float] = best) -> str:
            text = f"{values[m][i]:.4f}"
            return f"**{text}**" if values[m][i] == best[i] else text

        own = _mean(table, name, "dro", f"{side}_abdiff_within")
        paper = PAPER[side][name]
        row = [
            name,
            cell("dro", 0),
            f"{own:.4f}",
            cell("dro", 1),
            cell("samadi-mw", 0),
            cell("samadi-mw", 1),
            cell("fair-eig", 0),
            cell("fair-eig", 1),
            cell("pca", 0),
            cell("pca", 1),
            cell("mm", 0),
            cell("mm", 1),
            *(f"{v:.4f}" for v in paper),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def comparison(table: pd.DataFrame, names: list[str]) -> list[str]:
    """How our numbers relate to the paper's, counted from the tables (and why they differ)."""
    lines = []
    for side, title in (("test", "Out of sample"), ("train", "In sample")):
        means = table.groupby(["dataset", "method"])[[f"{side}_abdiff", f"{side}_are", f"{side}_abdiff_within"]].mean()
        shared = [n for n in names if n in PAPER[side]]
        are = np.array([means.loc[(n, "dro"), f"{side}_are"] / PAPER[side][n][1] - 1 for n in shared])
        gap = np.array([means.loc[(n, "dro"), f"{side}_abdiff_within"] / PAPER[side][n][0] - 1 for n in shared])

        def count(a: str, b: str, means: pd.DataFrame = means, side: str = side, shared: list[str] = shared) -> int:
            return sum(means.loc[(n, a), f"{side}_abdiff"] < means.loc[(n, b), f"{side}_abdiff"] for n in shared)

        lowest = sum(means.loc[n][f"{side}_abdiff"].idxmin() == "dro" for n in shared)
        paper_wins = sum(PAPER[side][n][0] < PAPER[side][n][2] for n in shared)
        lines.append(
            f"- {title}, {len(shared)} tables: our dro ARE vs the paper's RFPCA ARE, median {np.median(are):+.1%} "
            f"[{are.min():+.1%} … {are.max():+.1%}]; dro ABDiff about the groups' own means (the authors' "
            f"convention) vs the paper's, median {np.median(gap):+.1%} [quartiles {np.percentile(gap, 25):+.1%} … "
            f"{np.percentile(gap, 75):+.1%}]. dro's ABDiff is below samadi-mw's on {count('dro', 'samadi-mw')} of "
            f"{len(shared)} (paper: RFPCA below FairPCA on {paper_wins}), below PCA's on {count('dro', 'pca')}, and "
            f"the lowest of our five methods on {lowest}."
        )
    return lines


def pareto(runs: int) -> pd.DataFrame:
    """Fig. 2: Default Credit, whole table fitted and scored, every grid point, mean over seeds."""
    frame = load_dro_dataset("Default Credit")
    moments = compute_moments(frame, sensitive_feature="s", features=features_of(frame))
    grid = PAPER_GRIDS["dro"]
    points = [("dro", {"alpha": a, "lam": lam, **DRO_PAPER}) for a in grid["alpha"] for lam in grid["lam"]]
    points += [(m, {}) for m in METHODS if m != "dro"]
    rows = []
    for method, params in points:
        for seed in range(runs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = fit_projection(
                    moments, N_COMPONENTS, method=method, center="global", standardize=True, random_state=seed, **params
                )
            score = score_projection(model, moments, moments)
            rows.append(
                {
                    "method": method,
                    **params,
                    "seed": seed,
                    "abdiff": score.abdiff,
                    "are": score.are,
                    "abdiff_own_means": score.abdiff_within,
                }
            )
    return pd.DataFrame(rows)


def plot_pareto(points: pd.DataFrame, path: Path) -> None:
    mean = points.groupby(["method", "alpha", "lam"], dropna=False, sort=False)[["abdiff", "are"]].mean().reset_index()
    figure, axes = plt.subplots(figsize=(6.4, 4.6))
    dro = mean[mean["method"] == "dro"]
    for i, alpha in enumerate(sorted(dro["alpha"].unique())):
        part = dro[dro["alpha"] == alpha].sort_values("lam")
        axes.plot(
            part["are"], part["abdiff"], "o-", color=f"C{i}", markersize=4, label=f"dro α = {alpha:g} (λ 0 → 2.5)"
        )
    for j, method in enumerate(m for m in METHODS if m != "dro"):
        row = mean[mean["method"] == method].iloc[0]
        hollow = {"markersize": 15, "markerfacecolor": "none"} if method == "samadi-mw" else {"markersize": 9}
        axes.plot(
            row["are"], row["abdiff"], "*^sD"[j], color="black" if j == 0 else f"C{3 + j}", label=method, **hollow
        )  # samadi-mw and fair-eig reach the same optimum: the hollow marker shows both
    axes.set_xlabel("ARE (average reconstruction error)")
    axes.set_ylabel("ABDiff (|L_0 − L_1|)")
    axes.set_title("Default Credit, r = 3: ABDiff vs ARE over the grid (paper Fig. 2)")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DRO_DATASETS), choices=list(DRO_DATASETS))
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--pareto-runs", type=int, default=5)
    parser.add_argument("--blas-threads", type=int, default=1)
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    tables, infos = [], {}
    with threadpool_limits(args.blas_threads):
        for name in args.datasets:
            table, info = run_dataset(name, args.splits)
            tables.append(table)
            infos[name] = info
            print(
                f"{name}: {info['rows']} rows x {info['features']}, pass {info['pass_seconds']:.2f} s, "
                f"{info['fits']} fits in {info['seconds']:.1f} s",
                flush=True,
            )
        points = pareto(args.pareto_runs)
    table = pd.concat(tables, ignore_index=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    table.to_csv(RESULTS / "dro_table1.csv", index=False)
    points.to_csv(RESULTS / "dro_pareto.csv", index=False)
    plot_pareto(points, RESULTS / "dro_pareto.png")
    write_markdown(table, infos, points, args, load_start)


def write_markdown(
    table: pd.DataFrame, infos: dict, points: pd.DataFrame, args: argparse.Namespace, load_start: float
) -> None:
    names = list(infos)
    total = sum(i["seconds"] for i in infos.values())
    lines = [
        "# Distributionally robust fair PCA: Vu et al. Tables 1 and 3 with the library's evaluation protocol",
        "",
        f"`.venv/bin/python benchmarks/reproduce_dro.py --splits {args.splits} --pareto-runs {args.pareto_runs} "
        f"--blas-threads {args.blas_threads}` ({provenance(MEASURED)}); load average {load_start:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end.",
        "",
        f'r = {N_COMPONENTS}; rows hashed into 10 cells (`HashCells(("id",), 10)`, one pass per dataset); '
        f"{args.splits} splits of 3 training / 7 test cells; 3-fold CV (one cell per fold) of dro's 18-point grid "
        'minimising ABDiff + ARE; `center="global"`, `standardize=True` (per fit, training statistics, ddof 0). '
        "Mean over splits. **Bold**: lowest of our five methods.",
        "",
        "## Out of sample (paper Table 1)",
        "",
        *results_table(table, names, "test"),
        "",
        "## In sample (paper Table 3)",
        "",
        *results_table(table, names, "train"),
        "",
        "## Reading the tables",
        "",
        *comparison(table, names),
        "- Why the numbers are not the paper's: (1) splits are unions of 10 hash cells of the row number, "
        "not the authors' per-group stratified row splits with their seeds; each CV fold is one cell (10 % of "
        "the rows) where theirs is a third of the training rows, so the CV choice is noisier; (2) our ABDiff is "
        'taken about the centre the model uses (the training mean, `center="global"`), which includes each '
        "group's mean offset; the authors' code computes it about each group's own mean: the `own means` "
        "column is that number; ARE is the same convention as theirs (training mean and scale); (3) our "
        "samadi-mw is Samadi et al.'s min-max *loss* optimum, certified and LP-rounded (fair-eig gives the same "
        "value exactly), the paper's FairPCA is their MW stopped after 1000 steps with η cross-validated; "
        "(4) Default Credit is rebuilt from the UCI table (`datasets_paper.py`), SkillCraft has one row more "
        "than the authors' copy; (5) dro's restarts are seeded here (`random_state`), theirs use numpy's "
        "global state.",
        "- PCA (not in the paper's tables) has the lowest ARE almost everywhere, as it must in sample; out of "
        "sample it also has a lower ABDiff than dro on a few tables (e.g. Image, Statlog): with 30 % of the rows "
        "for training and one cell per fold, the robust objective's CV choice does not always pay off on the "
        "test rows. `mm` maximises the smallest group *variance*, a different criterion (Babu et al.), and pays "
        "for it in both numbers.",
        "",
        "## Cost",
        "",
        f"Whole protocol, {len(names)} datasets: {sum(i['fits'] for i in infos.values())} fits in {total:.0f} s "
        f"on the driver ({args.blas_threads} BLAS thread), after one pass over each table.",
        "",
        "| dataset | rows | d | pass s | protocol s | fits | dro s | other methods s | dro's chosen (α, λ): splits |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, info in infos.items():
        other = sum(v for m, v in info["per_method_seconds"].items() if m != "dro")
        chosen = ", ".join(f"{p}: {n}" for p, n in info["dro_params"].items())
        lines.append(
            f"| {name} | {info['rows']} | {info['features']} | {info['pass_seconds']:.2f} | "
            f"{info['seconds']:.1f} | {info['fits']} | {info['per_method_seconds']['dro']:.1f} | "
            f"{other:.2f} | {chosen} |"
        )
    mean = points.groupby(["method", "alpha", "lam"], dropna=False, sort=False)[["abdiff", "are"]].mean()
    lines += [
        "",
        "## Pareto (paper Fig. 2): Default Credit, r = 3, whole table",
        "",
        f"![pareto](dro_pareto.png) Mean over {args.pareto_runs} seeds; values in `dro_pareto.csv`.",
        "",
        "| method | α | λ | ABDiff | ARE |",
        "|---|---|---|---|---|",
        *(
            f"| {m} | {'' if pd.isna(a) else f'{a:g}'} | {'' if pd.isna(lam) else f'{lam:g}'} | {row['abdiff']:.4f} | "
            f"{row['are']:.4f} |"
            for (m, a, lam), row in mean.iterrows()
        ),
    ]
    (RESULTS / "dro_table1.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
