"""Install size and time of the core and of ``fairpca_dist[all]``, and the import time of the
package (benchmarks/results/install.md and install.json).

Each install goes into a fresh venv (``python -m venv``) from the wheel of this checkout, as a
user's ``pip install fairpca_dist`` / ``pip install "fairpca_dist[all]"`` would: no constraints,
so pip resolves the newest versions the ranges allow. The pip cache is warm after the first run
(the mirror is local), so the times are resolution + unpacking, not the network: each install is
run ``--repeat`` times. Size: the venv's site-packages, less an empty venv's.

Import time, in the core venv: the wall time of ``python -c "import fairpca_dist"`` less that of
``python -c pass``, and the cumulative time ``python -X importtime`` gives ``fairpca_dist``;
medians of ``--runs`` runs with their range, and the machine's load average while they ran.

    .venv/bin/python benchmarks/bench_install.py [--repeat 2] [--runs 9]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from provenance import provenance

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PYTHON = os.environ.get("PYTHON", shutil.which("python3.11") or sys.executable)
OPTIONAL = ("cvxpy", "prefect", "distributed", "matplotlib", "fairlearn", "s3fs")


def _run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:  # noqa: ANN003
    return subprocess.run(args, check=True, capture_output=True, text=True, **kwargs)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _venv(path: Path) -> Path:
    _run(PYTHON, "-m", "venv", str(path))
    _run(str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    return path


def measure_install(wheel: Path, extra: str, scratch: Path, repeat: int) -> dict:
    """Seconds of ``pip install <wheel>[extra]`` into fresh venvs, the size it adds, the packages."""
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    seconds = []
    for attempt in range(repeat):
        venv = _venv(scratch / f"{extra or 'core'}-{attempt}")
        empty = _size(_site(venv))
        started = time.perf_counter()
        _run(str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", target)
        seconds.append(time.perf_counter() - started)
        added = _size(_site(venv)) - empty
        frozen = [
            line
            for line in _run(str(venv / "bin" / "python"), "-m", "pip", "freeze").stdout.splitlines()
            if not line.startswith("fairpca_dist")
        ]
        if attempt < repeat - 1:
            shutil.rmtree(venv)
    largest = sorted(
        ((p.name, _size(p)) for p in _site(venv).iterdir() if p.is_dir() and not p.name.endswith("-info")),
        key=lambda item: -item[1],
    )[:6]
    return {
        "extra": extra or "core",
        "seconds": [round(s, 1) for s in seconds],
        "megabytes": round(added / 1e6),
        "packages": len(frozen),
        "versions": sorted(frozen),
        "largest": [(name, round(size / 1e6)) for name, size in largest],
        "venv": str(venv),
    }


def measure_import(venv: Path, runs: int) -> dict:
    """Wall and ``-X importtime`` seconds of importing fairpca_dist (and the estimator) in ``venv``."""
    python = str(venv / "bin" / "python")
    cwd = tempfile.gettempdir()  # not the checkout: the installed package

    def wall(code: str) -> float:
        started = time.perf_counter()
        _run(python, "-c", code, cwd=cwd)
        return time.perf_counter() - started

    def importtime(code: str) -> float:
        err = _run(python, "-X", "importtime", "-c", code, cwd=cwd).stderr
        found = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| fairpca_dist$", err, re.M)
        return int(found[-1]) / 1e6

    leaked = _run(
        python,
        "-c",
        "import sys, fairpca_dist; from fairpca_dist import FairPCA, compute_moments; "
        f"print([m for m in {OPTIONAL!r} if m in sys.modules])",
        cwd=cwd,
    ).stdout.strip()
    loads, result = [os.getloadavg()[0]], {"optional_modules_loaded": leaked}
    for name, code in (("fairpca_dist", "import fairpca_dist"), ("FairPCA", "from fairpca_dist import FairPCA")):
        wall("pass"), wall(code)  # warm the file cache
        base = [wall("pass") for _ in range(runs)]
        times = [wall(code) - statistics.median(base) for _ in range(runs)]
        cumulative = [importtime("import fairpca_dist") for _ in range(runs)] if name == "fairpca_dist" else []
        result[name] = {
            "wall_median": round(statistics.median(times), 3),
            "wall_range": [round(min(times), 3), round(max(times), 3)],
            "interpreter_median": round(statistics.median(base), 3),
            **(
                {
                    "importtime_median": round(statistics.median(cumulative), 3),
                    "importtime_range": [round(min(cumulative), 3), round(max(cumulative), 3)],
                }
                if cumulative
                else {}
            ),
        }
        loads.append(os.getloadavg()[0])
    result["load_1min"] = [round(value, 2) for value in loads]
    return result


def render(data: dict) -> str:
    lines = [
        "# Install size and time; import time",
        "",
        data["provenance"],
        "",
        f"{data['machine']}; {data['when']}; `benchmarks/bench_install.py --repeat {data['repeat']} "
        f"--runs {data['runs']}`. Fresh venvs of {data['python']}, installing the wheel of this checkout "
        "without constraints (the newest versions the ranges allow), pip cache warm (local mirror): "
        "times are resolution and unpacking. Size: what the install adds to the venv's site-packages.",
        "",
        "| install | packages besides fairpca_dist | size | time per install (s) | largest packages (MB) |",
        "|---|---|---|---|---|",
    ]
    for row in data["installs"]:
        largest = ", ".join(f"{name} {size}" for name, size in row["largest"])
        seconds = ", ".join(f"{s:.0f}" for s in row["seconds"])
        command = (
            "pip install fairpca_dist" if row["extra"] == "core" else f'pip install "fairpca_dist[{row["extra"]}]"'
        )
        lines.append(f"| `{command}` | {row['packages']} | {row['megabytes']} MB | {seconds} | {largest} |")
    imp = data["import"]
    lines += [
        "",
        "Before the extras (issue 32), every install was the whole stack: 149 packages, 1.2 GB.",
        "",
        f"Import, in the core venv ({data['runs']} runs each; load average over 1 min while measuring: "
        f"{', '.join(map(str, imp['load_1min']))} on {os.cpu_count()} cores):",
        "",
        "| statement | wall, median (range) | `-X importtime` cumulative, median (range) |",
        "|---|---|---|",
    ]
    for name, code in (("fairpca_dist", "import fairpca_dist"), ("FairPCA", "from fairpca_dist import FairPCA")):
        row = imp[name]
        cumulative = (
            f"{row['importtime_median']:.2f} s ({row['importtime_range'][0]:.2f}–{row['importtime_range'][1]:.2f})"
            if "importtime_median" in row
            else "—"
        )
        lines.append(
            f"| `{code}` | {row['wall_median']:.2f} s ({row['wall_range'][0]:.2f}–{row['wall_range'][1]:.2f}) "
            f"| {cumulative} |"
        )
    lines += [
        "",
        f"Wall times are less the bare interpreter's start ({imp['fairpca_dist']['interpreter_median']:.2f} s). "
        f"Optional packages in `sys.modules` after `import fairpca_dist; from fairpca_dist import FairPCA, "
        f"compute_moments`: {imp['optional_modules_loaded']}.",
        "",
        "Versions resolved:",
        "",
    ]
    for row in data["installs"]:
        lines.append(f"- {row['extra']}: " + ", ".join(row["versions"]))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="installs of each kind (default 2)")
    parser.add_argument("--runs", type=int, default=9, help="import timings of each statement (default 9)")
    parser.add_argument("--render", action="store_true", help="only rewrite install.md from install.json")
    args = parser.parse_args()
    if args.render:
        (RESULTS / "install.md").write_text(render(json.loads((RESULTS / "install.json").read_text())))
        return
    with tempfile.TemporaryDirectory(prefix="fairpca-bench-install-") as tmp:
        scratch = Path(tmp)
        _run(PYTHON, "-m", "pip", "wheel", "--quiet", "--no-deps", str(ROOT), "-w", str(scratch / "dist"))
        (wheel,) = (scratch / "dist").glob("fairpca_dist-*.whl")
        installs = [measure_install(wheel, extra, scratch, args.repeat) for extra in ("", "all")]
        imported = measure_import(Path(installs[0]["venv"]), args.runs)
    python = _run(PYTHON, "-c", "import platform; print(platform.python_version())").stdout.strip()
    data = {
        "provenance": provenance(["pyproject.toml", "benchmarks/bench_install.py"]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": f"Python {python}",
        "repeat": args.repeat,
        "runs": args.runs,
        "installs": installs,
        "import": imported,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "install.json").write_text(json.dumps(data, indent=1) + "\n")
    (RESULTS / "install.md").write_text(render(data))
    print(render(data))


if __name__ == "__main__":
    main()
