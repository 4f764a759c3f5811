"""Processes the tests start and stop themselves (servers, schedulers, workers): the
console scripts of this virtualenv, free loopback ports, and a group of subprocesses whose
logs are kept and which are all stopped, with every descendant, at the end."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

__all__ = ["Processes", "executable", "free_ports"]


def executable(name: str) -> str:
    """The console script next to this interpreter (the project's virtualenv), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} executable not found next to {sys.executable} or on PATH")
    return found


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (all bound at once, then released)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Processes:
    """Subprocesses of the test: logs in files, each in its own session; stop() ends them and
    every descendant (flow-run processes start their own sessions, so killing process groups
    alone would miss them)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, args: list[str], *, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
        with open(self.log_dir / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(
                args,
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.started.append((name, proc))
        return proc

    def check_alive(self) -> None:
        for name, proc in self.started:
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}\n{self.logs(name)}")

    def logs(self, *names: str, tail: int = 4000) -> str:
        out = []
        for name in names or [n for n, _ in self.started]:
            path = self.log_dir / f"{name}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            out.append(f"----- {name} (last {tail} chars of {path})\n{text[-tail:]}")
        return "\n".join(out)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop in reverse start order (the Prefect worker before the server it reports to):
        SIGTERM to the process group and every descendant, SIGKILL after ``timeout``. A group
        is signalled only while its leader is unreaped, so the id is still ours."""
        for _, proc in reversed(self.started):
            descendants: list[psutil.Process] = []
            if proc.returncode is None:
                try:
                    descendants = psutil.Process(proc.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    pass
                _signal_group(proc, signal.SIGTERM)
            for child in descendants:
                try:
                    child.terminate()
                except psutil.NoSuchProcess:
                    pass
            deadline = time.monotonic() + timeout
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=5)
            _, alive = psutil.wait_procs(descendants, timeout=max(0.1, deadline - time.monotonic()))
            for child in alive:
                try:
                    child.kill()
                except psutil.NoSuchProcess:
                    pass


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the leader started its own session: pgid == pid
    except (ProcessLookupError, PermissionError):
        pass
