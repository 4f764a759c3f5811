"""The README is the front page: at most 12 KB, its links lead to files of the repository, and its
quick start runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def quick_start_code(text: str) -> str:
    """The first ```python block after the '## Quick start' heading."""
    section = text.split("\n## Quick start\n", 1)
    assert len(section) == 2, "README.md has no '## Quick start' section"
    match = re.search(r"```python\n(.*?)```", section[1], flags=re.S)
    assert match, "the quick start of README.md has no ```python block"
    return match.group(1)


def test_readme_is_a_front_page_of_at_most_12_kb():
    assert len(README.read_bytes()) <= 12 * 1024


def test_readme_links_lead_to_files():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if not t.startswith(("http://", "https://")) and not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_quick_start_has_at_most_20_lines_and_runs_as_written(tmp_path):
    code = quick_start_code(README.read_text(encoding="utf-8"))
    assert len(code.strip().splitlines()) <= 20
    script = tmp_path / "quick_start.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "(442, 2)"
    # the numbers the README's comments give
    assert lines[1] == "largest group loss, PCA: 0.1157"
    assert lines[2] == "largest group loss, fair-eig: 0.0946"
