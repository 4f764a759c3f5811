"""The ``fairpca`` command."""

from __future__ import annotations

import subprocess
import sys

from fairpca_dist.cli import main


def test_demo_on_diabetes(capsys):
    assert main(["demo", "--max-components", "2"]) == 0
    out = capsys.readouterr().out
    assert "diabetes table" in out and "loss" in out
    assert out.count("\n") > 8


def test_demo_on_synthetic_parquet(tmp_path, capsys):
    assert main(["demo", "--synthetic-rows", "20000", "--rows-per-file", "3000", "--workdir", str(tmp_path), "--max-components", "3"]) == 0
    out = capsys.readouterr().out
    assert "20,000 rows" in out and "g1" in out
    assert len(list((tmp_path / "synthetic.parquet").glob("*.parquet"))) == 7


def test_console_script_reports_errors_cleanly():
    completed = subprocess.run(
        [sys.executable, "-m", "fairpca_dist.cli", "demo", "--synthetic-rows", "-5"],
        capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stderr.startswith("fairpca: error: n_rows") and "Traceback" not in completed.stderr
