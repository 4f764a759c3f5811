"""Time `fairpca demo` as a new user meets it: first runs on a new Prefect home, then later runs.

Each first run gets a Prefect home that does not exist yet and an environment with no
``PREFECT_*`` setting (a new machine); the later runs reuse the last home. Wall time is measured
around the whole command (interpreter start to exit); the demo's own breakdown ("finished in …:
imports …, Prefect API …, …") is recorded beside it. Targets (issue 10): first run ≤ 60 s,
later runs ≤ 15 s on this machine.

    python benchmarks/bench_first_contact.py [--repeats 3]

Writes benchmarks/results/first_contact.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"first": 60.0, "later": 15.0}


def run_demo(home: Path, runs: Path) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(home)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "fairpca_dist.cli", "demo", "--runs-dir", str(runs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"demo failed:\n{done.stdout}\n{done.stderr}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("finished in"))
    parts = {
        name.strip(): float(value) for name, value in re.findall(r"([A-Za-z ]+) ([\d.]+) s", line.split(":", 1)[1])
    }
    return {
        "wall": wall,
        "inside": float(re.match(r"finished in ([\d.]+) s", line)[1]),
        "parts": parts,
        "stderr_bytes": len(done.stderr),
    }


def summary(runs: list[dict[str, object]]) -> dict[str, float]:
    walls = [r["wall"] for r in runs]
    return {"median": statistics.median(walls), "min": min(walls), "max": max(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, object]]] = {"first": [], "later": []}
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(args.repeats):
            home = Path(scratch) / f"home-{i}"
            results["first"].append(run_demo(home, Path(scratch) / "runs"))
            print(f"first run {i + 1}: {results['first'][-1]['wall']:.1f} s", flush=True)
        for i in range(args.repeats):
            results["later"].append(run_demo(home, Path(scratch) / "runs"))
            print(f"later run {i + 1}: {results['later'][-1]['wall']:.1f} s", flush=True)
    RESULTS.mkdir(exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    load = os.getloadavg()[0]
    (RESULTS / "first_contact.json").write_text(
        json.dumps({"commit": commit, "load": load, **results}, indent=2) + "\n"
    )
    names = list(results["first"][0]["parts"])
    lines = [
        "# First contact: `fairpca demo` on a new machine",
        "",
        f"`python benchmarks/bench_first_contact.py --repeats {args.repeats}`, {time.strftime('%Y-%m-%d')}, "
        f"commit {commit}, 2 cores, load average {load:.2f} at the end. "
        "First runs: each on a Prefect home that does not exist yet (no `PREFECT_*` settings); "
        "later runs: the last home again. Wall = the whole command, interpreter start to exit.",
        "",
        "| run | wall median (min–max) | target | stderr bytes |",
        "| --- | --- | --- | --- |",
    ]
    for kind in ("first", "later"):
        s = summary(results[kind])
        verdict = "PASS" if s["max"] <= TARGETS[kind] else "FAIL"
        stderr = max(r["stderr_bytes"] for r in results[kind])
        lines.append(
            f"| {kind} | {s['median']:.1f} s ({s['min']:.1f}–{s['max']:.1f}) | ≤ {TARGETS[kind]:.0f} s: {verdict}"
            f" | {stderr} |"
        )
    lines += [
        "",
        "Where the time goes (the demo's own breakdown, median seconds; the rest of the wall time is "
        "interpreter start, importing the CLI and writing the demo table, and process exit):",
        "",
        "| run | " + " | ".join(names) + " |",
        "| --- |" + " --- |" * len(names),
    ]
    for kind in ("first", "later"):
        medians = [statistics.median(r["parts"][name] for r in results[kind]) for name in names]
        lines.append(f"| {kind} | " + " | ".join(f"{m:.1f}" for m in medians) + " |")
    (RESULTS / "first_contact.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
