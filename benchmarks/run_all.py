"""Run every benchmark and regenerate the results README: one table per area, ours against the
baseline measured in the same run, as ratios, and the scaling curves.

    .venv/bin/python benchmarks/run_all.py --quick        # under 10 minutes: scratch/quick/README.md
    .venv/bin/python benchmarks/run_all.py                # every benchmark at full size (hours): results/README.md
    .venv/bin/python benchmarks/run_all.py --only moments pipeline
    .venv/bin/python benchmarks/run_all.py --readme-only  # rebuild results/README.md from the JSON there
    .venv/bin/python benchmarks/run_all.py --fresh        # full size, ignoring what an earlier run finished

(``make bench`` and ``make bench-quick``.) Each benchmark runs as its own process, one after
another (they would distort each other's timings on a shared machine), and writes its own
Markdown and JSON; the JSON's ``ratios`` list (area, case, our seconds, the baseline and its
seconds, their ratio) is what the README tabulates. The quick mode runs the benchmarks that
have a small form, at that size, into ``scratch/quick/`` so that it never overwrites measured
results; the full mode also runs the paper reproductions, which have no baseline ratio and are
listed with their result files. A benchmark that fails is reported (its last lines of output)
and the others still run; the exit status is 1 if any failed.

The full mode takes hours, so it resumes: each benchmark's outcome is recorded in
``scratch/run_all_state.json`` with a fingerprint of the code it measures (every ``.py`` file of
the package, the flows, the tests and the benchmarks, and ``pyproject.toml``). Run again after
an interruption, it skips the benchmarks that finished at the same code and starts again with
the first that did not; one that was cut off mid-run and can continue (``resume`` arguments,
e.g. a paper reproduction's finished splits) is given them. ``--fresh`` runs everything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from provenance import commit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS, QUICK_RESULTS = HERE / "results", HERE / "scratch" / "quick"
PYTHON = sys.executable
AREAS = (
    "moments pass",
    "moments scaling",
    "solvers",
    "solvers near the eigensolver limit",
    "row-reading passes",
    "pipeline",
    "write-back",
    "object storage",
    "comparison",
)
# what a reader needs to know before an area's table
AREA_NOTES = {
    "solvers near the eigensolver limit": "Target (issue 16): every moment-based solver certified at 1e-4 within ≤ 2 "
    "eigendecomposition-equivalents per r at p = 1764. The moment-based methods outside it (the conic solvers of "
    "samadi-sdp, olfat-sdp and mm-sparse; the fixed-budget heuristics jevd and jevd-orthogonal, which have no "
    "certificate), "
    "their cost in the same unit and why: [eig_limit](eig_limit.md).",
    "object storage": "Target (issue 30): the library adds ≤ 10 % over dask's own S3 reading and writing, on a moto "
    "S3 server on loopback (the same two cores as the workers).",
}


@dataclass(frozen=True)
class Bench:
    """One benchmark script: its arguments in full and quick mode (``None``: full mode only),
    the JSON files it writes (with ``ratios``), the figures the README shows, and whether it
    needs ``OPENBLAS_NUM_THREADS=1`` from outside (the others set their own). A ``script``
    starting with ``-m`` is a module run with those arguments (the slow test scenarios).
    ``resume``: the arguments that make a full run cut off mid-way continue where it stopped."""

    name: str
    script: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] | None = None
    outputs: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    one_blas_thread: bool = False
    resume: tuple[str, ...] = ()

    def command(self, args: list[str]) -> list[str]:
        if self.script.startswith("-m "):
            return [PYTHON, *self.script.split(), *args]
        return [PYTHON, str(HERE / self.script), *args]

    @property
    def shown(self) -> str:
        return self.script.removeprefix("-m ") if self.script.startswith("-m ") else f"benchmarks/{self.script}"


BENCHES = (
    Bench("moments", "bench_moments.py", quick=("--rows", "400000", "--repeat", "2"), outputs=("bench_moments.json",)),
    Bench(
        "moments-kernel",
        "bench_moments.py",
        full=("--kernel",),
        quick=("--kernel", "--kernel-rows", "0.05", "--kernel-features", "10,50,200", "--repeat", "2"),
        outputs=("bench_moments_kernel.json",),
    ),
    Bench(
        "scaling",
        "bench_scaling.py",
        quick=("--quick",),
        outputs=("scaling.json",),
        figures=("moments_vs_rows.png", "moments_vs_features.png"),
    ),
    Bench("out-of-core", "bench_out_of_core.py", outputs=("bench_out_of_core.json",)),
    # a wide table out of core: 1,000 features, partitions converted to float64 in slabs
    Bench(
        "out-of-core-wide",
        "bench_out_of_core.py",
        full=(
            *("--rows", "400000", "--cols", "1000", "--rows-per-file", "25000", "--row-group-rows", "5000"),
            *("--name", "bench_out_of_core_wide"),
        ),
        outputs=("bench_out_of_core_wide.json",),
    ),
    Bench("memory", "bench_memory.py", quick=("--quick",), outputs=("bench_memory.json",)),
    Bench(
        "solvers", "bench_solvers.py", quick=("--quick",), outputs=("solvers.json",), figures=("solver_time_vs_p.png",)
    ),
    Bench("eig-limit", "bench_eig_limit.py", full=("--curve",), quick=("--repeats", "1"), outputs=("eig_limit.json",)),
    Bench(
        "mm-robust",
        "bench_mm_robust.py",
        quick=("--rows", "1000000", "--skip-plain", "--repeats", "2"),
        outputs=("mm_robust_scale.json",),
    ),
    Bench(
        "mmd-scale",
        "bench_mmd_scale.py",
        quick=("--parts", "table", "--table-steps", "passes", "--rows", "1000000", "--rff-d", "100", "--repeats", "2"),
        outputs=("mmd_scale.json",),
    ),
    Bench(
        "mmd-sample",
        "bench_mmd_sample.py",
        quick=("--rows", "1000000", "--repeats", "2"),
        outputs=("mmd_sample.json",),
    ),
    Bench("fnpm", "bench_fnpm.py", quick=("--quick",), outputs=("fnpm.json",)),
    Bench("fnpm-wide", "bench_fnpm_wide.py", quick=("--quick", "--name", "fnpm_wide"), outputs=("fnpm_wide.json",)),
    Bench("pipeline", "bench_pipeline.py", quick=("--quick",), outputs=("pipeline.json",)),
    # the same under load: two busy processes beside every timed command
    Bench(
        "pipeline-loaded",
        "bench_pipeline.py",
        full=("--background-load", "2", "--repeats", "1", "--writeback-repeats", "0", "--name", "pipeline_loaded"),
        outputs=("pipeline_loaded.json",),
    ),
    # issue 33's quick variant (4M x 50), measured in three rounds, quiet and under load
    Bench(
        "pipeline-quick",
        "bench_pipeline.py",
        full=("--rows", "4000000", "--repeats", "3", "--writeback-repeats", "2", "--name", "pipeline_quick"),
        outputs=("pipeline_quick.json",),
    ),
    Bench(
        "pipeline-quick-loaded",
        "bench_pipeline.py",
        full=(
            *("--rows", "4000000", "--repeats", "3", "--writeback-repeats", "0"),
            *("--background-load", "2", "--name", "pipeline_quick_loaded"),
        ),
        outputs=("pipeline_quick_loaded.json",),
    ),
    Bench("storage", "bench_storage.py", quick=("--quick",), outputs=("bench_storage.json",)),
    Bench("compare", "bench_compare.py", outputs=("compare.json",)),
    # the reliability scenarios too slow for `make test` (pyproject: -m "not slow" by default)
    Bench("slow-tests", "-m pytest -q -m slow", quick=(), one_blas_thread=True),
    # no baseline ratio: paper reproductions and their own targets (results/<name>.md)
    Bench("first-contact", "bench_first_contact.py", outputs=("first_contact.json",)),
    Bench("samadi-timing", "bench_samadi_timing.py"),
    Bench("mm-timing", "bench_mm_timing.py"),
    Bench("dro-speed", "bench_dro_speed.py"),
    Bench("evaluate-scale", "bench_evaluate_scale.py"),
    Bench("outliers-mm-robust", "outliers_mm_robust.py"),
    Bench("reproduce-samadi", "reproduce_samadi.py"),
    Bench("reproduce-mm", "reproduce_mm.py"),
    Bench("reproduce-dro", "reproduce_dro.py"),
    Bench("reproduce-jevd", "reproduce_jevd.py"),
    Bench("reproduce-mmd", "reproduce_mmd.py", one_blas_thread=True, resume=("--resume",)),
)


STATE = HERE / "scratch" / "run_all_state.json"
FINGERPRINTED = ("fairpca_dist", "flows", "tests", "benchmarks")


def code_fingerprint() -> str:
    """sha256 of every ``.py`` file the benchmarks run (package, flows, tests, benchmarks but this
    runner, not ``scratch/``) and of ``pyproject.toml``: equal fingerprints, equal code measured."""
    digest = hashlib.sha256()
    files = sorted(
        path
        for folder in FINGERPRINTED
        for path in (ROOT / folder).rglob("*.py")
        if path != Path(__file__).resolve() and "scratch" not in path.relative_to(ROOT).parts
    )
    for path in [*files, ROOT / "pyproject.toml"]:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def load_state(code: str) -> dict[str, dict]:
    """The outcomes an earlier full run recorded at this code (``{}`` if none or other code)."""
    try:
        state = json.loads(STATE.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return {name: entry for name, entry in state.items() if entry.get("code") == code}


def save_state(state: dict[str, dict]) -> None:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    staging = STATE.with_suffix(".tmp")
    staging.write_text(json.dumps(state, indent=1))
    staging.replace(STATE)


def run(bench: Bench, quick: bool, results: Path, log_dir: Path, resume: bool = False) -> dict:
    """Run one benchmark to the end; its outcome (status, seconds, the tail of a failure).
    ``resume``: continue a full run of it that was cut off (its ``resume`` arguments)."""
    args = [
        *((bench.quick or ()) if quick else bench.full),
        *(bench.resume if resume else ()),
        *(("--results", str(results)) if bench.outputs else ()),
    ]
    # each script chooses its BLAS threads (make exports OPENBLAS_NUM_THREADS=1 for the tests)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if bench.one_blas_thread:
        env["OPENBLAS_NUM_THREADS"] = "1"
    command = bench.command(args)
    shown = " ".join([bench.shown, *args])
    log = log_dir / f"{bench.name}.log"
    print(f"== {bench.name}: {shown} (log {log})", flush=True)
    started, load = time.perf_counter(), os.getloadavg()[0]
    with open(log, "a" if resume else "w") as out:
        code = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - started
    tail = log.read_text(errors="replace").splitlines()[-15:] if code else []
    print(f"   {'ok' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s", flush=True)
    return {
        "name": bench.name,
        "command": shown,
        "status": code,
        "seconds": seconds,
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "tail": tail,
    }


def collect(results: Path, benches: tuple[Bench, ...]) -> dict[str, list[dict]]:
    """Every ``ratios`` entry of the benchmarks' JSON files in ``results``, by area."""
    by_area: dict[str, list[dict]] = {}
    for bench in benches:
        for name in bench.outputs:
            path = results / name
            if path.is_file():
                measured = json.loads(path.read_text())
                for ratio in measured.get("ratios", []):
                    load = ratio.get("load", _load_span(measured))
                    by_area.setdefault(ratio["area"], []).append({**ratio, "source": name, "load": load})
    return by_area


_LOAD_KEYS = (
    ("load_start", "load_end"),
    ("load_before", "load_after"),
    ("load_average_start", "load_average_end"),
    ("load_average", "load_average_end"),
    ("load_average", "load_average"),
    ("load", "load"),
)


def _load_span(measured: dict) -> str:
    """The load average a benchmark ran at, from its JSON (whichever of the names the scripts
    use: ``load_start``/``load_end``, ``load_average_start``/``load_average_end``, …), as
    "1.2→2.3" (one number when it recorded one); "–" when it recorded none."""
    for start, end in _LOAD_KEYS:
        first, last = _one_minute(measured.get(start)), _one_minute(measured.get(end))
        if first is not None and last is not None:
            return f"{first:.1f}" if start == end or first == last else f"{first:.1f}→{last:.1f}"
    return "–"


def _one_minute(value: object) -> float | None:
    """A recorded load: a number, or ``os.getloadavg()``'s triple (its 1-minute average)."""
    if isinstance(value, list) and value:
        value = value[0]
    return float(value) if isinstance(value, (int, float)) else None


def readme(results: Path, benches: tuple[Bench, ...], outcomes: dict[str, dict], quick: bool) -> str:
    measured = commit()
    by_area = collect(results, benches)
    lines = [
        "# Benchmark results",
        "",
        f"Regenerated by `benchmarks/run_all.py{' --quick' if quick else ''}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {measured}"
        + (
            " (quick mode: small sizes, one or two repeats — a smoke test of the benchmarks, not a measurement)"
            if quick
            else ""
        )
        + '. Column "load" is the 1-minute load average at the start and the end of the benchmark (or of the '
        'case, where the benchmark records it per case); each benchmark\'s own file (column "from") names the '
        "commit and the spread of its repeats: the VM's 2 cores are shared, so single timings move by ±30 %.",
        "",
        "**Ratio** = our time / the baseline's time, both measured in the same run of the same script "
        "(< 1: ours is faster); for the solvers the baseline is one dense eigendecomposition at the same p, so "
        "the ratio is the cost in eigendecomposition-equivalents; for row-reading passes it is one moments pass "
        "over the same table.",
        "",
    ]
    for area in [*AREAS, *sorted(set(by_area) - set(AREAS))]:
        rows = by_area.get(area)
        if not rows:
            continue
        lines += [f"## {area[0].upper()}{area[1:]}", ""] + ([AREA_NOTES[area], ""] if area in AREA_NOTES else [])
        lines += ["| case | ours s | baseline | baseline s | ratio | load | from |", "|---|---|---|---|---|---|---|"]
        lines += [
            f"| {r['case']} | {r['ours_seconds']:.3g} | {r['baseline']} | {r['baseline_seconds']:.3g} | "
            f"**{r['ratio']:.2f}** | {r['load']} | "
            f"[{r['source'].removesuffix('.json')}]({r['source'].removesuffix('.json')}.md) |"
            for r in rows
        ]
        lines.append("")
    figures = [f for bench in benches for f in bench.figures if (results / f).is_file()]
    if figures:
        lines += ["## Scaling curves", ""] + [f"![{f.removesuffix('.png')}]({f})" for f in figures] + [""]
    lines += ["## Every benchmark", "", "| benchmark | this run | results |", "|---|---|---|"]
    for bench in benches:
        outcome = outcomes.get(bench.name)
        state = (
            (
                "not run in quick mode"
                if quick and bench.quick is None
                else "not run by this command: its results as last written"
            )
            if outcome is None
            else ("ok" if outcome["status"] == 0 else f"**failed** (exit {outcome['status']})")
            + f", {outcome['seconds']:.0f} s"
            + (f" (kept from an earlier run, finished {outcome['finished']})" if outcome.get("kept") else "")
        )
        files = ", ".join(
            f"[{name.removesuffix('.json')}.md]({name.removesuffix('.json')}.md)" for name in bench.outputs
        ) or (
            "its outcome in this table, its output in scratch/logs/"
            if bench.script.startswith("-m ")
            else "its files in results/ (benchmarks/README.md)"
        )
        lines.append(f"| `{bench.shown}` | {state} | {files} |")
    failed = [o for o in outcomes.values() if o["status"]]
    for outcome in failed:
        lines += [
            "",
            f"### {outcome['name']} failed",
            "",
            f"`{outcome['command']}`",
            "",
            "```",
            *outcome["tail"],
            "```",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the small form of each benchmark that has one (< 10 min)")
    parser.add_argument("--only", nargs="+", choices=[b.name for b in BENCHES], help="run only these")
    parser.add_argument("--readme-only", action="store_true", help="rebuild the README from the JSON already written")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="full mode: run every benchmark, also those an interrupted run finished at this code",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="where the README goes and (quick mode) the benchmarks write (default: results/, quick: scratch/quick/)",
    )
    args = parser.parse_args()
    results = args.results or (QUICK_RESULTS if args.quick else RESULTS)
    results.mkdir(parents=True, exist_ok=True)
    chosen = [
        b for b in BENCHES if (args.only is None or b.name in args.only) and (not args.quick or b.quick is not None)
    ]
    outcomes: dict[str, dict] = {}
    if not args.readme_only:
        log_dir = HERE / "scratch" / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        # only the full mode into results/ resumes: quick runs take minutes, other folders are experiments
        resumable = not args.quick and results == RESULTS
        code = code_fingerprint() if resumable else ""
        state = {} if args.fresh or not resumable else load_state(code)
        for bench in chosen:
            earlier = state.get(bench.name, {})
            if earlier.get("status") == 0:
                print(f"== {bench.name}: finished at this code on {earlier['finished']} (kept; --fresh reruns it)")
                outcomes[bench.name] = {**earlier, "kept": True}
                continue
            if resumable:
                state[bench.name] = {"code": code, "status": None}
                save_state(state)
            cut_off = "status" in earlier and earlier["status"] is None and bool(bench.resume)
            outcomes[bench.name] = run(bench, args.quick, results, log_dir, resume=cut_off)
            if resumable:
                state[bench.name] = {
                    **outcomes[bench.name],
                    "code": code,
                    "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                }
                save_state(state)
        print(f"all done in {time.perf_counter() - started:.0f} s", flush=True)
    (results / "README.md").write_text(readme(results, BENCHES, outcomes, args.quick))
    print(f"wrote {results / 'README.md'}")
    sys.exit(1 if any(o["status"] for o in outcomes.values()) else 0)


if __name__ == "__main__":
    main()
