"""Errors of the operating system reach a command-line user as one line naming the path.

Permissions cannot be tested as root (root reads and writes anything), so these cases run the
real ``fairpca`` command as the unprivileged user ``nobody`` (``setpriv``) when the tests run
as root, and directly otherwise; a read-only disk is a read-only tmpfs mounted in a private
mount namespace (``unshare --mount``), which needs root.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

FAIRPCA = [sys.executable, "-m", "fairpca_dist.cli"]
AS_ROOT = os.geteuid() == 0


def _unprivileged(command: list[str]) -> list[str]:
    if not AS_ROOT:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to run as an unprivileged user")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]


def _run(command: list[str], cwd: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(cwd),
        "PREFECT_HOME": str(cwd / ".prefect"),
        "MPLCONFIGDIR": str(cwd / ".mpl"),
        **environment,
    }
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _one_line(result: subprocess.CompletedProcess[str], pattern: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fairpca: error: "), result.stderr
    assert "Traceback" not in result.stderr and pattern in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def world(tmp_path_factory) -> Path:
    """A folder every user may enter, holding a small CSV."""
    root = tmp_path_factory.mktemp("os-errors")
    root.chmod(0o777)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(60, 3)), columns=list("abc")).assign(
        sex=np.where(np.arange(60) % 2, "f", "m")
    )
    frame.to_csv(root / "s.csv", index=False)
    (root / "s.csv").chmod(0o644)
    base = tmp_path_factory.getbasetemp()
    for folder in (base.parent, base):  # pytest's folders are private to their user: let others enter
        folder.chmod(folder.stat().st_mode | 0o711)
    return root


def test_permission_denied_on_the_input_names_it(world):
    private = world / "private"
    private.mkdir()
    shutil.copy(world / "s.csv", private / "s.csv")
    private.chmod(0o700)
    result = _run(
        _unprivileged([*FAIRPCA, "ingest", str(private / "s.csv"), str(world / "table"), "--sensitive-feature", "sex"]),
        world,
    )
    _one_line(result, f"cannot read '{private / 's.csv'}': permission denied")
    assert not (world / "table").exists()


def test_permission_denied_on_the_output_folder_names_it(world):
    locked = world / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    result = _run(
        _unprivileged([*FAIRPCA, "ingest", str(world / "s.csv"), str(locked / "table"), "--sensitive-feature", "sex"]),
        world,
    )
    _one_line(result, f"could not write {locked / 'table'}: permission denied")
    assert list(locked.iterdir()) == []


@pytest.mark.skipif(not AS_ROOT or shutil.which("unshare") is None, reason="mounting needs root and unshare")
def test_a_read_only_disk_is_a_write_error_naming_the_output(world):
    disk = world / "disk"
    disk.mkdir()
    (disk / "table").mkdir()  # a previous output, which must survive
    (disk / "table" / "schema.json").write_text("{}")
    digest = hashlib.sha256((disk / "table" / "schema.json").read_bytes()).hexdigest()
    script = (
        f"mount --bind {disk} {disk} && mount -o remount,bind,ro {disk} && "
        f"exec {' '.join(FAIRPCA)} ingest {world / 's.csv'} {disk / 'table'} --sensitive-feature sex"
    )
    result = _run(["unshare", "--mount", "sh", "-c", script], world)
    _one_line(result, f"could not write {disk / 'table'}: the file system is read-only")
    assert hashlib.sha256((disk / "table" / "schema.json").read_bytes()).hexdigest() == digest


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("command", ["pipeline", "demo"])
def test_an_unreachable_prefect_api_is_named_before_anything_is_written(world, command):
    url = f"http://127.0.0.1:{_free_port()}/api"
    args = [str(world / "s.csv"), "--sensitive-feature", "sex"] if command == "pipeline" else []
    before = sorted(p.name for p in world.iterdir())
    result = _run([*FAIRPCA, command, *args, "--runs-dir", str(world / "runs")], world, PREFECT_API_URL=url)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "Traceback" not in result.stderr
    assert f"fairpca: error: no Prefect API answers at {url} (PREFECT_API_URL" in result.stderr
    assert sorted(p.name for p in world.iterdir() if not p.name.startswith(".")) == [
        n for n in before if not n.startswith(".")
    ]
