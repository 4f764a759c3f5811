"""The provenance line every benchmark result starts with: the commit and the files measured."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()


def commit() -> str:
    """``git describe --always`` of the code measured, with ``-dirty`` when a tracked ``.py``
    file or ``pyproject.toml`` differs from it (the files ``run_all`` fingerprints: a full run
    rewrites its results and their READMEs as it goes, which says nothing about the code)."""
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", "*.py", "pyproject.toml")
    return _git("describe", "--always") + ("-dirty" if changed else "")


def provenance(files: Sequence[str]) -> str:
    """``commit <describe>; sha256[:12] `file` <hash>, …`` for ``files`` (paths from the repository root)."""
    hashes = ", ".join(f"`{f}` {hashlib.sha256((ROOT / f).read_bytes()).hexdigest()[:12]}" for f in files)
    return f"commit {commit()}; sha256[:12] {hashes}"
