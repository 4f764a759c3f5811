"""Object storage: the moments pass and the write-back on an S3 server against the same table on
local disk and against dask's own S3 reading and writing, in one run.

    .venv/bin/python benchmarks/bench_storage.py            # 4M x 20 (0.8 GB of Parquet), 7 rounds, ~10 min
    .venv/bin/python benchmarks/bench_storage.py --quick    # 500k x 20 in 8 files, 2 rounds, ~1.5 min

1. Starts a real S3 server on loopback (moto's, in a process of its own, with authentication
   on: ``tests/s3_server.start_server``, the one the tests use) and puts its endpoint and keys
   in the environment (``AWS_*``), where s3fs finds them in this process and in the workers.
2. Writes the table (``bench_out_of_core.write_table``: 4 groups of 50/30/15/5 %, float64
   features, 250k-row files of 50k-row row groups) to ``scratch/storage/table/`` and uploads
   the same files to ``s3://<bucket>/table/``.
3. On one ``LocalCluster(2 workers x 1 thread)`` (whose workers inherit the ``AWS_*``
   variables), after one untimed round, ``--repeats`` rounds, each running every case once,
   in an order that rotates from round to round:

   (a) moments pass: ``fairpca_dist.compute_moments`` of the bucket's table, of the local
       table, and a plain dask full read of the bucket,
       ``dd.read_parquet(url).map_partitions(len).compute()`` (every column read and decoded;
       the same for the local table, beside);
   (b) write-back: ``fairpca_dist.project_table`` (r = ``--r``) from the bucket to an s3://
       output (each round replaces the previous round's output: a new version, its pointer,
       the old version removed, as a rerun does), and from the local table to a local output;
       plain dask ``dd.read_parquet(src).to_parquet(dst)`` copy of the whole table within the
       bucket, and, writing the same columns as ours, dask
       ``read_parquet(features).map_partitions(project).to_parquet`` into the bucket and on
       the disk (``bench_pipeline.dask_projection``). Every dask output goes to a new prefix
       or folder, removed untimed after the round;
   (c) the cost per call that does not grow with the table: (a) and (b) in the bucket on a
       table of one 10,000-row file.

   Each timing is a wall time around one call that returns when the result is computed or
   the output committed; the load average is recorded beside each.
4. Checks (reported): the largest relative differences between the moments from the bucket
   and from the disk, and between ours' projections from the bucket and from the disk and
   dask's projection.

Ratios (``ratios`` in the json, tabulated by ``run_all.py``): median over rounds of ours /
baseline, and the median [min–max] of the ratios within a round. Target (issue 30): the
library adds ≤ 10 % over dask's own S3 reading and writing. Beside them, what the bucket adds
over the disk (median s3 − median local) for ours over the same for dask (``s3_share``): the
ratios also hold the library's own work (moments arithmetic, validation, the commit), done on
either storage. The S3 server is a Python process on the same two cores as the workers:
absolute times are moto's, not a cloud store's; the ratios compare the same reads and writes
through the same server.

Writes results/bench_storage.{md,json} (``--results``, ``--name``); the local table is deleted
unless ``--keep`` (the bucket lives as long as the server: this run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))
from bench_out_of_core import write_table  # noqa: E402
from bench_pipeline import dask_projection  # noqa: E402
from disk import require_free_disk  # noqa: E402
from provenance import provenance  # noqa: E402
from s3_server import start_server  # noqa: E402

RESULTS, SCRATCH = HERE / "results", HERE / "scratch"
TINY_ROWS = 10_000
MEASURED = [
    "fairpca_dist/io/storage.py",
    "fairpca_dist/io/versions.py",
    "fairpca_dist/io/atomic.py",
    "fairpca_dist/engine/sources.py",
    "fairpca_dist/engine/passes.py",
    "fairpca_dist/projection.py",
]


def load() -> float:
    return os.getloadavg()[0]


def timed(function: Callable[[], object]) -> tuple[object, float, float]:
    """(value, seconds, load average when it ended)."""
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started, load()


def dask_read(url: str) -> int:
    """A plain dask full read: every column of every partition read and decoded."""
    import dask.dataframe as dd

    return int(dd.read_parquet(url).map_partitions(len).compute().sum())


def dask_copy(source: str, out: str) -> None:
    import dask.dataframe as dd

    dd.read_parquet(source).to_parquet(out, write_index=False, compute=True)


def moments_difference(a, b) -> float:
    """Largest relative difference of the per-group counts, means and scatter matrices."""
    diffs = [np.abs(a.count - b.count).max() / np.abs(b.count).max()]
    for x, y in ((a.mean, b.mean), (a.scatter, b.scatter)):
        diffs.append(np.linalg.norm(x - y) / np.linalg.norm(y))
    return float(max(diffs))


def projection_difference(ours: pd.DataFrame, theirs: pd.DataFrame, names: list[str]) -> float:
    a, b = ours[names].to_numpy(), theirs[names].to_numpy()
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def rounds(
    cases: dict[str, Callable[[], object]], repeats: int, label: str, after_round: Callable[[], None] = lambda: None
) -> dict[str, dict[str, list[float]]]:
    """One untimed round, then ``repeats`` rounds of every case, the order rotating by one per
    round; per case the seconds and the load average at the end of each timing.
    ``after_round`` runs untimed after each round."""
    names = list(cases)
    for name in names:
        cases[name]()
    after_round()
    times: dict[str, dict[str, list[float]]] = {name: {"seconds": [], "load": []} for name in names}
    for round_ in range(repeats):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            _, seconds, load_now = timed(cases[name])
            times[name]["seconds"].append(seconds)
            times[name]["load"].append(load_now)
        after_round()
        print(
            f"  {label} round {round_ + 1}: " + ", ".join(f"{n} {times[n]['seconds'][-1]:.2f} s" for n in names),
            flush=True,
        )
    return times


def s3_share(times: dict[str, dict[str, list[float]]], ours: str, baseline: str) -> float:
    """What reading or writing the bucket instead of the disk adds to ours (median s3 − median
    local) over what it adds to the baseline."""

    def extra(case: str) -> float:
        return float(np.median(times[f"{case} s3"]["seconds"]) - np.median(times[f"{case} local"]["seconds"]))

    return extra(ours) / extra(baseline)


def ratio(times: dict[str, dict[str, list[float]]], ours: str, baseline: str) -> dict:
    """Median of ours over median of the baseline, and the spread of the within-round ratios."""
    a, b = np.array(times[ours]["seconds"]), np.array(times[baseline]["seconds"])
    within = a / b
    return {
        "ours_seconds": float(np.median(a)),
        "baseline_seconds": float(np.median(b)),
        "ratio": float(np.median(a) / np.median(b)),
        "within_round_median": float(np.median(within)),
        "within_round_min": float(within.min()),
        "within_round_max": float(within.max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--cols", type=int, default=20)
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument("--row-group-rows", type=int, default=50_000)
    parser.add_argument("--r", type=int, default=5, help="components of the projection written back")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (after one untimed round)")
    parser.add_argument("--worker-memory", default="2GB")
    parser.add_argument("--quick", action="store_true", help="500k x 20 in 8 files, 2 rounds")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--name", default="bench_storage")
    parser.add_argument("--keep", action="store_true", help="keep the local table in scratch/storage/")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.rows_per_file, args.repeats = 500_000, 62_500, 2

    scratch = SCRATCH / "storage"
    table_bytes = args.rows * (args.cols + 1) * 8
    require_free_disk(scratch, 3 * table_bytes, "the table and two local projections")
    out: dict = {
        "command": " ".join(["benchmarks/bench_storage.py", *sys.argv[1:]]),
        "provenance": provenance(MEASURED),
        "rows": args.rows,
        "cols": args.cols,
        "r": args.r,
        "repeats": args.repeats,
        "worker_memory": args.worker_memory,
        "load_start": load(),
    }
    server = start_server()
    os.environ.update(server.env)  # before the cluster starts: its workers inherit them
    try:
        import s3fs
        from dask.distributed import Client, LocalCluster

        from fairpca_dist import compute_moments, fit_projection
        from fairpca_dist.projection import project_table

        bucket = server.new_bucket()
        fs = s3fs.S3FileSystem()
        local_table, s3_table = scratch / "table", f"s3://{bucket}/table"
        print(f"writing {args.rows:,} x {args.cols} and uploading it to {s3_table} ...", flush=True)
        files = write_table(local_table, args.rows, args.rows_per_file, args.row_group_rows, args.cols)
        _, out["upload_seconds"], _ = timed(lambda: fs.put([str(f) for f in files], f"{s3_table}/"))
        out["table_gb"] = sum(f.stat().st_size for f in files) / 1e9
        out["files"] = len(files)
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, memory_limit=args.worker_memory, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            moments_calls = {
                "ours s3": lambda: compute_moments(s3_table, sensitive_feature="group", client=client),
                "ours local": lambda: compute_moments(str(local_table), sensitive_feature="group", client=client),
                "dask s3": lambda: dask_read(s3_table),
                "dask local": lambda: dask_read(str(local_table)),
            }
            print("moments pass:", flush=True)
            out["moments"] = rounds(moments_calls, args.repeats, "moments")
            from_s3, from_disk = moments_calls["ours s3"](), moments_calls["ours local"]()
            out["moments_s3_vs_local"] = moments_difference(from_s3, from_disk)

            model = fit_projection(from_s3, args.r, method="pca")
            names = [f"fairpca{j}" for j in range(args.r)]
            s3_out, local_out = f"s3://{bucket}/projected", scratch / "projected"
            copies: list[str] = []

            def fresh(kind: str, where: str = f"s3://{bucket}") -> str:
                copies.append(f"{where}/{kind}-{len(copies)}")
                return copies[-1]

            def remove_copies() -> None:
                for url in copies:
                    if url.startswith("s3://"):
                        fs.rm(url, recursive=True)
                    else:
                        shutil.rmtree(url)
                copies.clear()

            write_calls = {
                "ours s3": lambda: project_table(model, s3_table, s3_out, client=client),
                "ours local": lambda: project_table(model, str(local_table), local_out, client=client),
                "dask copy s3": lambda: dask_copy(s3_table, fresh("copy")),
                # bench_pipeline's: the same arithmetic; its rmtree of a fresh URL has nothing to remove
                "dask projection s3": lambda: dask_projection(client, s3_table, model, fresh("dask-projected")),
                "dask projection local": lambda: dask_projection(
                    client, local_table, model, fresh("dask-projected", str(scratch))
                ),
            }
            print("write-back:", flush=True)
            out["writeback"] = rounds(write_calls, args.repeats, "write-back", after_round=remove_copies)
            import dask.dataframe as dd

            ours_s3 = dd.read_parquet(f"{s3_out}/{json.loads(fs.cat(f'{s3_out}/_CURRENT'))['version']}").compute()
            ours_local = pd.read_parquet(local_out)
            write_calls["dask projection s3"]()
            theirs = dd.read_parquet(copies[-1]).compute()
            remove_copies()
            out["writeback_s3_vs_local"] = projection_difference(ours_s3, ours_local, names)
            out["writeback_ours_vs_dask"] = projection_difference(ours_s3, theirs, names)
            out["s3_output_objects"] = len(fs.find(s3_out))

            # the cost per call that does not grow with the table: one file of TINY_ROWS rows
            tiny_files = write_table(scratch / "tiny", TINY_ROWS, TINY_ROWS, TINY_ROWS, args.cols)
            tiny = f"s3://{bucket}/tiny"
            fs.put([str(f) for f in tiny_files], f"{tiny}/")
            print("fixed cost:", flush=True)
            out["fixed"] = rounds(
                {
                    "ours moments": lambda: compute_moments(tiny, sensitive_feature="group", client=client),
                    "dask read": lambda: dask_read(tiny),
                    "ours write-back": lambda: project_table(
                        model, tiny, f"s3://{bucket}/tiny-projected", client=client
                    ),
                    "dask projection": lambda: dask_projection(client, tiny, model, fresh("tiny-dask-projected")),
                },
                args.repeats,
                "fixed cost",
                after_round=remove_copies,
            )
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    out["load_end"] = load()
    m, w = out["moments"], out["writeback"]
    size = f"{args.rows:,} x {args.cols}"
    out["ratios"] = [
        {
            "area": "object storage",
            "case": f"`compute_moments` of an s3:// table, {size}",
            "baseline": "dask `read_parquet(s3://…).map_partitions(len)`",
            **ratio(m, "ours s3", "dask s3"),
        },
        {
            "area": "object storage",
            "case": f"`project_table` s3:// → s3://, {size}, r = {args.r}",
            "baseline": "dask `read_parquet(s3://…).to_parquet(s3://…)` copy",
            **ratio(w, "ours s3", "dask copy s3"),
        },
        {
            "area": "object storage",
            "case": f"`project_table` s3:// → s3://, {size}, r = {args.r}",
            "baseline": "dask `read_parquet → map_partitions(project) → to_parquet`, s3://",
            **ratio(w, "ours s3", "dask projection s3"),
        },
    ]
    out["context"] = {
        "moments s3 / local (ours)": ratio(m, "ours s3", "ours local"),
        "moments s3 / local (dask)": ratio(m, "dask s3", "dask local"),
        "moments ours / dask (local)": ratio(m, "ours local", "dask local"),
        "write-back s3 / local (ours)": ratio(w, "ours s3", "ours local"),
        "write-back s3 / local (dask projection)": ratio(w, "dask projection s3", "dask projection local"),
        "write-back ours / dask projection (local)": ratio(w, "ours local", "dask projection local"),
    }
    out["s3_share"] = {
        "moments pass": s3_share(m, "ours", "dask"),
        "write-back": s3_share(w, "ours", "dask projection"),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{args.name}.json").write_text(json.dumps(out, indent=2, default=float) + "\n")
    (args.results / f"{args.name}.md").write_text(markdown(out))
    print((args.results / f"{args.name}.md").read_text())


def fixed_cost(times: dict[str, dict[str, list[float]]]) -> list[str]:
    """The lines on the calls over a one-file table: what each call costs whatever the table's size."""
    med = {name: float(np.median(t["seconds"])) for name, t in times.items()}
    return [
        f"Cost per call that does not grow with the table (one file of {TINY_ROWS:,} rows in the bucket, medians): "
        f"`compute_moments` {med['ours moments']:.2f} s vs dask's read {med['dask read']:.2f} s "
        f"(+{med['ours moments'] - med['dask read']:.2f} s: listing, planning, the pointer probe); `project_table` "
        f"{med['ours write-back']:.2f} s vs dask's projection {med['dask projection']:.2f} s "
        f"(+{med['ours write-back'] - med['dask projection']:.2f} s: the output checks, the marker, the conditional "
        "pointer write, the previous version's removal). These are requests answered on loopback here; on a "
        "remote store each waits for its round trip.",
        "",
    ]


def gap(times: dict[str, dict[str, list[float]]], ours: str, baseline: str, what: str) -> str:
    """How much of ours' extra time over ``baseline`` in the bucket is there on the disk too."""

    def median(case: str) -> float:
        return float(np.median(times[case]["seconds"]))

    return (
        f"ours takes {median(f'{ours} s3') - median(f'{baseline} s3'):+.2f} s over {what} in the bucket and "
        f"{median(f'{ours} local') - median(f'{baseline} local'):+.2f} s on the disk"
    )


def markdown(out: dict) -> str:
    def spread(xs: list[float]) -> str:
        return f"{np.median(xs):.2f} [{min(xs):.2f}–{max(xs):.2f}]"

    def table(times: dict, baseline: str, labels: dict[str, str]) -> list[str]:
        base = np.median(times[baseline]["seconds"])
        rows = ["| | s, median [min–max] | load during | / baseline |", "|---|---|---|---|"]
        for name, label in labels.items():
            t = times[name]
            rows.append(
                f"| {label} | {spread(t['seconds'])} | {min(t['load']):.1f}–{max(t['load']):.1f} | "
                f"{np.median(t['seconds']) / base:.2f} |"
            )
        return rows

    gb = out["table_gb"]
    lines = [
        "# Object storage: the moments pass and the write-back on S3, against local disk and plain dask",
        "",
        f"`{out['command']}` ({out['provenance']}). Load {out['load_start']:.2f} at the start, {out['load_end']:.2f} "
        f"at the end (2 shared cores). Table: {out['rows']:,} rows x {out['cols']} float64 features + group, "
        f"{gb:.2f} GB of Parquet in {out['files']} files, on local disk and in a bucket of a moto S3 server on "
        f"loopback (authentication on; uploaded in {out['upload_seconds']:.0f} s). `LocalCluster(2 workers x 1 "
        f"thread, memory_limit={out['worker_memory']})`. One untimed round, then {out['repeats']} rounds of every "
        "case, the order rotating.",
        "",
        "## Moments pass",
        "",
        *table(
            out["moments"],
            "dask s3",
            {
                "dask s3": "dask `read_parquet(s3://…).map_partitions(len)`: full read of the bucket (baseline)",
                "ours s3": "`compute_moments(s3://…)`",
                "dask local": "dask `read_parquet(local).map_partitions(len)`",
                "ours local": "`compute_moments(local)`",
            },
        ),
        "",
        f"Moments from the bucket vs from the disk: largest relative difference {out['moments_s3_vs_local']:.1e}.",
        "",
        "## Write-back",
        "",
        *table(
            out["writeback"],
            "dask copy s3",
            {
                "dask copy s3": "dask `read_parquet(s3://…).to_parquet(s3://…)`: copy of the whole table in the bucket "
                "(baseline)",
                "dask projection s3": "dask `read_parquet(features).map_partitions(project).to_parquet(s3://…)`: the "
                "same columns as ours",
                "ours s3": f"`project_table` s3:// → s3:// (r = {out['r']}; a new version, its pointer, the previous "
                "version removed)",
                "ours local": "`project_table` local → local (staging, rename, flock)",
                "dask projection local": "dask projection local → local",
            },
        ),
        "",
        f"Our projections from the bucket and from the disk agree to {out['writeback_s3_vs_local']:.1e}, ours and "
        f"dask's to {out['writeback_ours_vs_dask']:.1e} (max relative difference); the committed s3:// output holds "
        f"{out['s3_output_objects']} objects.",
        "",
        "## Ratios (target: ≤ 1.10 against dask's own S3 reading and writing)",
        "",
        "| ours | baseline | ratio of medians | within-round ratios, median [min–max] |",
        "|---|---|---|---|",
        *(
            f"| {r['case']} | {r['baseline']} | **{r['ratio']:.2f}** | {r['within_round_median']:.2f} "
            f"[{r['within_round_min']:.2f}–{r['within_round_max']:.2f}] |"
            for r in out["ratios"]
        ),
        *(
            f"| context: {name} | | {r['ratio']:.2f} | {r['within_round_median']:.2f} [{r['within_round_min']:.2f}–"
            f"{r['within_round_max']:.2f}] |"
            for name, r in out["context"].items()
        ),
        "",
        *fixed_cost(out["fixed"]),
        "What the bucket adds over the disk (median s3 − median local), ours over the baseline's: moments pass "
        f"{out['s3_share']['moments pass']:.2f} (vs dask's full read), write-back {out['s3_share']['write-back']:.2f} "
        "(vs dask's projection); 1 means the same extra cost as dask's. The ratios above also hold the library's "
        "own work (the moments arithmetic, validation, the commit), which it does on either storage: "
        + "; ".join(
            gap(times, ours, baseline, what)
            for times, ours, baseline, what in (
                (out["moments"], "ours", "dask", "dask's read"),
                (out["writeback"], "ours", "dask projection", "dask's projection"),
            )
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
