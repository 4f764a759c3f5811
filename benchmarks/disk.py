"""Benchmarks that write large tables check the free disk first."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def require_free_disk(folder: Path, need: float, what: str) -> None:
    """Create ``folder`` and exit with a message unless ``need`` bytes are free under it."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < need:
        sys.exit(
            f"refusing to run: {free / 1e9:.1f} GB free under {folder}, need {need / 1e9:.1f} GB "
            f"for {what} (use a smaller --rows)"
        )
