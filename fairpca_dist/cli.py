"""The ``fairpca`` command."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from fairpca_dist import metrics
from fairpca_dist.datasets import load_diabetes_table, write_synthetic_parquet
from fairpca_dist.exceptions import FairPCAError
from fairpca_dist.moments import GroupMoments
from fairpca_dist.passes import compute_moments
from fairpca_dist.solvers import SOLVERS, fit_projection

__all__ = ["main", "group_table"]


def group_table(
    moments: GroupMoments, ranks: Sequence[int], *, methods: Sequence[str] = ("pca",), standardize: bool = True
) -> pd.DataFrame:
    """Per-group quality of each method for each r in ``ranks``: rows, average reconstruction
    error, loss (error minus the group's own best rank-r error) and explained variance."""
    rows = []
    for r in ranks:
        for method in methods:
            projection = fit_projection(moments, r, method=method, standardize=standardize)
            working = moments.rescaled(projection.scale)
            kept = metrics.group_explained_variance_ratio(working, projection.components, center=projection.center)
            for g, label in enumerate(moments.groups):
                rows.append(
                    {
                        "n_components": r,
                        "method": method,
                        "group": label,
                        "rows": int(moments.count[g]),
                        "avg_error": projection.group_error[g],
                        "loss": projection.group_loss[g],
                        "explained_variance": kept[g],
                    }
                )
    return pd.DataFrame(rows)


def _demo(args: argparse.Namespace) -> int:
    ranks = range(1, args.max_components + 1)
    methods = ["pca"] if args.method == "pca" else ["pca", args.method]
    if args.synthetic_rows:
        with tempfile.TemporaryDirectory(prefix="fairpca-demo-") as scratch:
            folder = Path(args.workdir or scratch) / "synthetic.parquet"
            started = time.perf_counter()
            write_synthetic_parquet(folder, args.synthetic_rows, rows_per_file=args.rows_per_file)
            print(f"wrote {args.synthetic_rows:,} rows to {folder} in {time.perf_counter() - started:.1f} s")
            started = time.perf_counter()
            moments = compute_moments(
                str(folder), sensitive_feature="group", key_columns=["row_id"], client=args.dask_address, progress=True
            )
            elapsed = time.perf_counter() - started
            print(f"grouped moments of {moments.n_samples:,} rows x {moments.n_features} features "
                  f"in one dask pass: {elapsed:.1f} s ({moments.n_samples / elapsed:,.0f} rows/s)")
            table = group_table(moments, ranks, methods=methods)
    else:
        frame = load_diabetes_table()
        moments = compute_moments(frame, sensitive_feature="sex", exclude=["target"], client=args.dask_address)
        print(f"diabetes table (scikit-learn): {moments.n_samples} rows, features {list(moments.feature_names)}, "
              f"sensitive feature 'sex' with groups {list(moments.groups)}")
        table = group_table(moments, ranks, methods=methods)
    print(f"\n{' vs '.join(methods)} (standardised features): per-group reconstruction quality\n")
    with pd.option_context("display.float_format", "{:.4f}".format, "display.width", 120):
        print(table.to_string(index=False))
    worst = table.groupby(["n_components", "method"])["loss"].max().unstack("method")
    print("\nlargest group loss per n_components:")
    with pd.option_context("display.float_format", "{:.4f}".format):
        print(worst[list(methods)].to_string())
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    from fairpca_dist import __version__

    parser = argparse.ArgumentParser(prog="fairpca", description="Fair PCA on large tables.")
    parser.add_argument("--version", action="version", version=f"fairpca_dist {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="fit PCA and a fair method on an embedded table; print per-group errors and losses",
        description="Fit PCA and a fair method for n_components 1..5 on scikit-learn's diabetes "
        "table (sensitive feature: sex) or on a generated Parquet table, and print a per-group table.",
    )
    demo.add_argument("--synthetic-rows", type=int, default=0, metavar="N",
                      help="generate an N-row table with group-dependent covariance as Parquet and use it")
    demo.add_argument("--rows-per-file", type=_positive_int, default=500_000, help="rows per generated Parquet file")
    demo.add_argument("--workdir", help="where to write the generated table (default: a temporary folder)")
    demo.add_argument("--max-components", type=_positive_int, default=5, help="largest n_components (default 5)")
    demo.add_argument("--method", default="fair-eig", choices=sorted(SOLVERS),
                      help="fair method shown next to the PCA baseline (default fair-eig)")
    demo.add_argument("--dask-address", default=None, help="address of a running dask scheduler")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fairpca`` console script."""
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except FairPCAError as error:
        print(f"fairpca: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
