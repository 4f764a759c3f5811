"""Prefect's temporary API server, tied to the command that starts it.

Prefect starts its temporary ("ephemeral") server as a child process in the caller's process
group. A terminal's Ctrl-C reaches every process of that group at once, so the server died
while the command was still marking its flow run crashed, and those API calls were retried
for minutes (8 tracebacks, exit after 144 s). A command killed outright (SIGKILL, the out-of-
memory killer) left the server running for good.

:class:`TemporaryServer` runs Prefect's own server command with Prefect's own environment,
but

- in a session of its own, so signals sent to the command's process group do not reach it:
  the command stops it (:meth:`~prefect.server.api.server.SubprocessASGIServer.stop`) once
  its flow runs are marked finished, failed or crashed;
- under :func:`main`, which watches the parent: when the command that started it has died,
  the server exits by itself (SIGTERM to itself, uvicorn's graceful shutdown; a hard exit if
  that takes longer than :data:`GRACE_SECONDS`).

Import this module only to start a server: it imports Prefect's server application.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Sequence
from typing import Any

import prefect.server.api.server as prefect_server

__all__ = ["TemporaryServer", "main", "POLL_SECONDS", "GRACE_SECONDS"]

_MODULE = "fairpca_dist.flows.api_server"  # this module, also when it runs as ``__main__``

POLL_SECONDS = 0.5
"""How often the server checks that its parent is alive."""

GRACE_SECONDS = 10.0
"""How long an orphaned server may take to shut down gracefully before it exits at once."""


class TemporaryServer(prefect_server.SubprocessASGIServer):
    """Prefect's temporary API server in a session of its own, exiting when its parent dies.

    Prefect keeps one temporary server per process (``SubprocessASGIServer()`` returns it),
    so flow runs in this process use this one once it is created.
    """

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        parent = os.getpid()

        def popen(args: Sequence[str], **options: Any) -> subprocess.Popen[Any]:
            # Prefect's ``python -m uvicorn ...`` becomes ``python -m fairpca_dist.flows.api_server PID -m uvicorn ...``
            return subprocess.Popen([args[0], "-m", _MODULE, str(parent), *args[1:]], start_new_session=True, **options)

        # Prefect builds the command and its environment; only its Popen call is ours.
        stand_in = types.ModuleType("subprocess")
        stand_in.__dict__.update({**vars(subprocess), "Popen": popen})
        prefect_server.subprocess = stand_in
        try:
            return super()._run_uvicorn_command()
        finally:
            prefect_server.subprocess = subprocess


def _exit_with_parent(parent: int) -> None:
    """Return never; once ``parent`` is no longer this process's parent (it died and this
    process was handed to another), stop this process."""
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_SECONDS)
    os._exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m fairpca_dist.flows.api_server PARENT_PID -m MODULE [ARGS...]``: run ``MODULE`` as
    ``python -m MODULE ARGS...`` would, in this process, while a thread watches that
    ``PARENT_PID`` is still its parent."""
    parent, flag, module, *arguments = sys.argv[1:] if argv is None else argv
    if flag != "-m":
        raise SystemExit(f"usage: python -m {_MODULE} PARENT_PID -m MODULE [ARGS...]")
    threading.Thread(target=_exit_with_parent, args=(int(parent),), name="exit-with-parent", daemon=True).start()
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
