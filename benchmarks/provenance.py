"""The provenance line every benchmark result starts with: the commit and the files measured."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def provenance(files: Sequence[str]) -> str:
    """``commit <describe>; sha256[:12] `file` <hash>, …`` for ``files`` (paths from the repository root)."""
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    hashes = ", ".join(f"`{f}` {hashlib.sha256((ROOT / f).read_bytes()).hexdigest()[:12]}" for f in files)
    return f"commit {commit}; sha256[:12] {hashes}"
