"""Prefect's temporary API server, started early by a command and tied to it.

Prefect starts its temporary ("ephemeral") server as a child process in the caller's process
group, on the first API call, and waits for it there. Three things about that cost a command:

- a terminal's Ctrl-C reaches every process of the group at once, so the server died while the
  command was still marking its flow run crashed, and those API calls were retried for minutes
  (8 tracebacks, exit after 144 s); a command killed outright (SIGKILL, the out-of-memory
  killer) left the server running for good;
- the command waits for the whole start (2.5-3 s on an idle 2-core machine: a new interpreter
  importing Prefect's server application, then its database check), although it has work of its
  own to do meanwhile (its imports, its checks, the demo's table);
- starting it through Prefect (``SubprocessASGIServer``) imports Prefect's server application
  into the command too: another second of imports the command never uses.

:class:`TemporaryServer` runs Prefect's own server command (uvicorn serving
``prefect.server.api.server:create_app``, as ``SubprocessASGIServer`` does) with Prefect's own
environment, but

- :meth:`~TemporaryServer.launch` starts it and returns at once; :meth:`~TemporaryServer.wait`
  waits for its health check when the command needs the API;
- in a session of its own, so signals sent to the command's process group do not reach it:
  the command stops it (:meth:`~TemporaryServer.stop`) once its flow runs are marked finished,
  failed or crashed;
- under :func:`main`, which watches the parent: when the command that started it has died,
  the server exits by itself (SIGTERM to itself, uvicorn's graceful shutdown; a hard exit if
  that takes longer than :data:`GRACE_SECONDS`).
- lighter: it registers no block types (:data:`LIGHT_START`, unless the user set otherwise), so
  it imports no Prefect collection (prefect-dask, hence dask and distributed) at its start, and
  it skips Alembic's migration check when its database is current (:func:`light_start`);
- launchable before the command imports Prefect (``TemporaryServer(settle=True)``,
  :func:`launched_early`): the server process then reads the user's Prefect settings itself,
  reports what it found (an API of the user's: it exits at once; whether it creates its
  database) and applies its defaults where the user has not set them, so that its start (3-5 s
  of a core, mostly imports) overlaps the command's own imports (Prefect's 1.5-2 s among them);
- warm when the flows first call it: as soon as it answers, it answers a few read-only requests of
  the API itself (:func:`_warm_up`), which build FastAPI's routing tables (0.6-0.9 s at the first
  request otherwise: FastAPI >= 0.139 builds them lazily) and what the first flow run's creation
  needs (0.25-0.35 s otherwise), while the command is still busy; then it tells the command so
  (:meth:`TemporaryServer.answers`), which meanwhile does work of its own run.

This module imports only the standard library at its top: the server process runs it by path
(``python -P …/api_server.py``), without importing ``fairpca_dist`` (dask, pandas: 1.3 s), and
the command imports Prefect's server application nowhere.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import http.client
import importlib.util
import json
import os
import re
import runpy
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "TemporaryServer",
    "launched_early",
    "new_database",
    "light_start",
    "migrations_head",
    "main",
    "LIGHT_START",
    "LIGHT_IMPORTS",
    "SERVER_DEFAULTS",
    "POLL_SECONDS",
    "GRACE_SECONDS",
    "STOP_SECONDS",
]

POLL_SECONDS = 0.5
"""How often the server checks that its parent is alive."""

GRACE_SECONDS = 10.0
"""How long an orphaned server may take to shut down gracefully before it exits at once."""

STOP_SECONDS = 5.0
"""How long :meth:`TemporaryServer.stop` waits for a graceful shutdown before it kills the server
(Prefect's ``SubprocessASGIServer.stop`` waits as long)."""

HEALTH_POLL_SECONDS = 0.05
"""How often :meth:`TemporaryServer.wait` asks the starting server's health check."""

_STARTUP_FAILURE = 3  # uvicorn's exit status when it cannot start, e.g. its port was taken meanwhile

# Prefect's server command (prefect 3.8.8, SubprocessASGIServer._run_uvicorn_command), after the
# port; tests/flows/test_api_server.py checks that it is still Prefect's.
_UVICORN_OPTIONS = ("--log-level", "error", "--lifespan", "on")
# Prefect's command also sets PREFECT__SERVER_FINAL=1. With FastAPI < 0.137 its app then drops the
# routes the routers copied when included (~50 MB); with the FastAPI this library requires (>= 0.139)
# it only has create_app call gc.collect() over every object the server imported (the collector is
# off until then: main), which frees nothing and took 0.25-0.3 s of every start.
_SERVER_ENVIRONMENT = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1"}

LIGHT_START: dict[str, str] = {
    # Block types (Prefect's storage, notification, ... blocks) are registered in the database by
    # a server that lasts; the command's flows use none. At every start Prefect's server either
    # registered them or checked that they had not changed, which imports every installed Prefect
    # collection (prefect-dask: dask and distributed): 0.7-1 s of CPU at each start of the
    # temporary server, 2.5 s at the first (registration). A later `prefect server start` on the
    # same database registers them then (its memo of the registration is left untouched).
    "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
    "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false",
}
"""Settings of the temporary server that make its start lighter, each set only where the user has
not set it (their settings of the same name win: :meth:`TemporaryServer.environment`)."""

LIGHT_IMPORTS: dict[str, str] = {
    # py-key-value (the storage of docket, Prefect's server's background tasks, kept in memory by a
    # temporary server) checks the types of its own calls at run time: beartype, installed as an
    # import hook over its package, rewrites each of its modules as it is imported (0.1-0.2 s of the
    # server's start, every start); its checks only warn, in a process whose warnings no one reads.
    "PY_KEY_VALUE_DISABLE_BEARTYPE": "true",
}
"""Environment variables of the libraries under Prefect's server that make the temporary server's
imports lighter; the environment's own values win (:meth:`TemporaryServer.environment`)."""

SERVER_DEFAULTS: dict[str, str] = {
    # No usage telemetry from the temporary server (it fails offline and locks the database).
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}
"""Prefect's settings for a temporary server of this library, set only where the user has not set
them; part of :data:`fairpca_dist.flows.runtime.PREFECT_DEFAULTS` (also for Prefect's own
temporary server), applied by the server process itself when it settles its settings
(:func:`_settle`)."""

_WARM_UP_REQUESTS: tuple[tuple[str, str], ...] = (
    ("GET", "/api/admin/version"),  # behind almost every router of Prefect's API (API_ROUTERS' order)
    # read-only queries of the flow-run and task-run tables (none match: a first run, or at most one row):
    # after both, the first flow run is created in 0.03-0.06 s instead of 0.25-0.35 s
    ("POST", "/api/flow_runs/filter"),
    ("POST", "/api/task_runs/filter"),
)
"""The requests a temporary server answers as soon as it is up (:func:`_warm_up`), in order; a POST
carries the body ``{"limit": 1}``. Each reads; none writes to the database."""


def new_database(settings: Any) -> bool:
    """Whether a Prefect API server with these ``settings`` (Prefect's ``Settings``) creates its
    SQLite database at its start: the default database, in the Prefect home, not there yet."""
    database = _default_database(settings)
    return database is not None and not database.exists()


def _default_database(settings: Any) -> Path | None:
    """The SQLite file of a server with these ``settings``: Prefect's default database in the
    Prefect home; None when the settings name another database."""
    database = Path(settings.home) / "prefect.db"
    connection = settings.server.database.connection_url  # set by Prefect's defaults
    url = connection.get_secret_value() if connection is not None else ""
    return database if url.startswith("sqlite") and str(database) in url else None


def light_start(settings: Any) -> dict[str, str]:
    """:data:`LIGHT_START`, and no migration check when the database is current: Prefect's server
    runs Alembic's upgrade at every start (``PREFECT_SERVER_DATABASE_MIGRATE_ON_START``), which
    loads and compiles every one of Prefect's ~110 migration scripts to find that there is nothing
    to do: 0.6-0.8 s of the temporary server's start (5.1 s against 4.4 s to warm, medians of 5
    alternating starts). It is left out when the default database already records the head of
    the installed Prefect's migrations (:func:`_database_is_current`); a new database, one of an
    older Prefect, or any doubt keeps it."""
    current = _default_database(settings)
    if current is None or not _database_is_current(current):
        return dict(LIGHT_START)
    return {**LIGHT_START, "PREFECT_SERVER_DATABASE_MIGRATE_ON_START": "false"}


def _database_is_current(database: Path) -> bool:
    """Whether the SQLite ``database`` records, as Alembic's version, the one head of the SQLite
    migrations shipped with the installed Prefect (:func:`migrations_head`). Read-only; False when
    it cannot tell (no such file, no version table, a database busy or locked, several rows)."""
    head = migrations_head()
    if head is None or not database.is_file():
        return False
    try:
        with contextlib.closing(
            sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        ) as connection:
            versions = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return False
    return versions == [(head,)]


_REVISION = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(.+?)\s*$", re.MULTILINE)


def migrations_head() -> str | None:
    """The head revision of the SQLite migrations of the installed Prefect, read from its scripts'
    ``revision`` and ``down_revision`` lines without importing Alembic: the one revision no
    script names as its ``down_revision``. None when that is not certain: no scripts where
    Prefect keeps them, a script whose lines do not parse, or not exactly one head."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or spec.origin is None:
        return None
    scripts = sorted((Path(spec.origin).parent / "server/database/_migrations/versions/sqlite").glob("*.py"))
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in scripts:
        if script.name == "__init__.py":
            continue
        found = {match[1]: match[2] for match in _REVISION.finditer(script.read_text(encoding="utf-8"))}
        try:
            revision = ast.literal_eval(found["revision"])
            parent = ast.literal_eval(found["down_revision"])
        except (KeyError, ValueError, SyntaxError):
            return None
        if not isinstance(revision, str):
            return None
        revisions.add(revision)
        parents.update([parent] if isinstance(parent, str) else parent or ())
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _free_port() -> int:
    """A TCP port of 127.0.0.1 that no one listens on now (the system's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TemporaryServer:
    """Prefect's temporary API server in a session of its own, exiting when its parent dies.

    ``launch()`` starts it, ``wait()`` returns once its API answers, ``stop()`` ends it. The
    command and its flows reach it by :attr:`api_url` (``PREFECT_API_URL``).

    With ``settle``, it is launched without Prefect's settings (Prefect need not be imported):
    the server process reads them itself, as the command would, and :meth:`settled` returns what
    it found (:func:`_settle`).
    """

    def __init__(self, *, settle: bool = False) -> None:
        self.settle = settle
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.launched = 0.0  # time.perf_counter() at the first launch
        self._report: Any = None  # with settle: the pipe the server process writes its report to
        self._report_fd: int | None = None  # its end in the server process
        self._warm: int | None = None  # the pipe the server process closes once warm (_warm_up)
        self._warm_fd: int | None = None  # its end in the server process

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def command(self) -> list[str]:
        """Prefect's server command, run under :func:`main` (this file, by path). Prefect's
        location is looked up, not imported."""
        spec = importlib.util.find_spec("prefect")
        assert spec is not None and spec.origin is not None, "prefect is installed (fairpca_dist.flows checks)"
        report = ("--report", str(self._report_fd)) if self._report_fd is not None else ()
        warm = ("--warm", str(self._warm_fd)) if self._warm_fd is not None else ()
        return [
            *(sys.executable, "-P", str(Path(__file__).resolve()), str(os.getpid()), *report, *warm),
            *("-m", "uvicorn", "--app-dir", str(Path(spec.origin).parent.parent)),
            *("--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port)),
            *_UVICORN_OPTIONS,
        ]

    def environment(self) -> dict[str, str]:
        """Prefect's environment of its server: this process's, no UI, and the Prefect settings
        in effect here (those of the current settings context included); and the settings of
        :data:`LIGHT_START` the user has not set, and the variables of :data:`LIGHT_IMPORTS` this
        process's environment does not set. With ``settle``: this process's environment, no UI
        and :data:`LIGHT_IMPORTS` (the server process settles the rest: :func:`_settle`)."""
        if self.settle:
            return {**LIGHT_IMPORTS, **os.environ, **_SERVER_ENVIRONMENT}
        from prefect.settings import get_current_settings

        current = get_current_settings()
        settings = current.to_environment_variables(exclude_unset=True)
        return {**LIGHT_IMPORTS, **os.environ, **_SERVER_ENVIRONMENT, **light_start(current), **settings}

    def launch(self) -> None:
        """Start the server process on a free port and return at once."""
        self.port = _free_port()
        self._close_pipes()
        if self.settle:
            read, self._report_fd = os.pipe()
            self._report = os.fdopen(read, "rb")
        self._warm, self._warm_fd = os.pipe()
        try:
            self.process = subprocess.Popen(
                self.command(),
                env=self.environment(),
                start_new_session=True,
                pass_fds=tuple(fd for fd in (self._report_fd, self._warm_fd) if fd is not None),
            )
        finally:
            for fd in (self._report_fd, self._warm_fd):
                if fd is not None:
                    os.close(fd)  # the server process has its copy
            self._report_fd = self._warm_fd = None
        self.launched = self.launched or time.perf_counter()

    def settled(self, timeout: float) -> dict[str, Any]:
        """What a server launched with ``settle`` found in the user's Prefect settings (waited
        for, up to ``timeout`` seconds; it reads them first thing): ``configured_api``, the URL
        of an API the user configured (then it has exited), else None, and ``new_database``
        (:func:`new_database`). Empty if the server said nothing (it exited, or took longer)."""
        if self._report is None:
            return {}
        ready, _, _ = select.select([self._report], [], [], timeout)
        text = self._report.read() if ready else b""  # to the end: the server closes its end after writing
        self._report.close()
        self._report = None
        return dict(json.loads(text)) if text else {}

    def _close_pipes(self) -> None:
        if self._report is not None:
            self._report.close()
            self._report = None
        if self._warm is not None:
            os.close(self._warm)
            self._warm = None

    def wait(self, timeout: float) -> float:
        """Return the seconds since :meth:`launch` once the API answers its health check.

        A server that could not start on its port (taken since :func:`_free_port` chose it) is
        started again on another, as Prefect does. Raises
        :class:`~fairpca_dist.exceptions.ServiceError` if the server exits, or does not answer
        within ``timeout`` seconds of the launch.
        """
        from fairpca_dist.exceptions import ServiceError

        assert self.process is not None, "launch() first"
        while True:
            status = self.process.poll()
            if status == _STARTUP_FAILURE:
                self.launch()
                continue
            if status is not None:
                raise ServiceError(
                    f"the temporary Prefect API server exited with status {status} before it answered at "
                    f"{self.api_url} (its error is above); set PREFECT_API_URL to use a server of your own"
                )
            if self._healthy(max(timeout, 1.0)):
                return time.perf_counter() - self.launched
            if time.perf_counter() - self.launched > timeout:
                self.stop()
                raise ServiceError(
                    f"the temporary Prefect API server did not answer at {self.api_url} within {timeout:.0f} s "
                    "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS): a loaded machine may need more"
                )
            time.sleep(HEALTH_POLL_SECONDS)

    def answers(self) -> bool:
        """Whether the server is up and warm now, without waiting: it answers its health check
        and has answered the warm-up requests of :func:`_warm_up` (the server process closes a
        pipe then; it is closed too when the process has exited)."""
        if self._warm is None:
            return False
        ready, _, _ = select.select([self._warm], [], [], 0)
        return bool(ready)

    def _healthy(self, timeout: float) -> bool:
        """Whether the server answers its health check (False: not listening yet). Plain HTTP on
        the loopback, asked with the standard library: an httpx client loaded the system's CA
        certificates first (0.05-0.15 s) for a connection that uses no TLS."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request("GET", "/api/health")
            return connection.getresponse().status == 200
        except (OSError, http.client.HTTPException):  # refused, reset, or not HTTP yet
            return False
        finally:
            connection.close()

    def stop(self) -> None:
        """End the server: SIGTERM (uvicorn's graceful shutdown), SIGKILL after :data:`STOP_SECONDS`."""
        if self.process is None:
            self._close_pipes()
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            self.process = None
            self._close_pipes()  # after its end: a report written to a closed pipe would fail there


@contextlib.contextmanager
def launched_early() -> Iterator[TemporaryServer | None]:
    """Launch the temporary server now, before this process imports Prefect
    (``TemporaryServer(settle=True)``), and stop it on leaving; yield it, or None when
    ``PREFECT_API_URL`` is in the environment (the user's API: nothing to launch).

    For a command that runs flows: its imports (Prefect's, dask's, the flows': 3-6 s) then
    overlap the server's start. Hand the server to
    :func:`fairpca_dist.flows.runtime.api_server`, which uses it unless the user's Prefect
    settings name an API (the server process, which saw that too, has exited then).
    """
    if os.environ.get("PREFECT_API_URL"):
        yield None
        return
    server = TemporaryServer(settle=True)
    server.launch()
    try:
        yield server
    finally:
        server.stop()


def _settle(report_fd: int) -> bool:
    """In a server process launched with ``settle``: read the user's Prefect settings; unless they
    name an API, apply :data:`SERVER_DEFAULTS` and :func:`light_start`'s settings where the user
    has not set them; write to ``report_fd`` what was found (:meth:`TemporaryServer.settled`). Return
    whether to start the server (no API of the user's)."""
    import prefect.context
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    configured = settings.to_environment_variables(exclude_unset=True)  # the user's, by their variables' names
    report: dict[str, Any] = {"configured_api": str(settings.api.url) if settings.api.url else None}
    if report["configured_api"] is None:
        defaults = {**SERVER_DEFAULTS, **light_start(settings)}
        os.environ.update({name: value for name, value in defaults.items() if name not in configured})
        prefect.context.refresh_global_settings_context()
        report["new_database"] = new_database(get_current_settings())
    with contextlib.suppress(BrokenPipeError), os.fdopen(report_fd, "w") as channel:
        json.dump(report, channel)  # unread if the command has gone on without it (a server launched again)
    return report["configured_api"] is None


def _collect_from_now_on() -> None:
    """Turn Python's garbage collector back on (:func:`main` turned it off while the server process
    imports Prefect's server application and starts it), with every object made so far frozen
    (:func:`gc.freeze`): modules, classes, Pydantic's schemas, hundreds of thousands of long-lived
    objects that each full collection would traverse again. During those imports the collector
    ran its collections for nothing, 0.5-0.7 s of the server's 3-4 s (measured: ``import
    prefect.server.api.server`` 3.6 s of CPU with it on, 2.9 s off)."""
    gc.freeze()
    gc.enable()


def _warm_up(port: int, warm: int | None = None) -> None:
    """Once the server on ``port`` answers its health check, turn the garbage collector back on
    (:func:`_collect_from_now_on`) and ask its API the questions of
    :data:`_WARM_UP_REQUESTS`: the work a server does at the first request of a kind (FastAPI
    builds its routing tables at the first request that goes through them, the first queries of
    the run tables set up what a flow run's creation uses) would otherwise be the first flow's.
    Then close the file descriptor ``warm``, if given: the command's sign that the server is
    warm (:meth:`TemporaryServer.answers`); until then, it goes on with its own work (0.5-0.9 s
    of warm-up, which its first request would wait for)."""
    try:
        _answer_warm_up_requests(port)
    finally:
        if warm is not None:
            os.close(warm)


def _answer_warm_up_requests(port: int) -> None:
    """:func:`_warm_up`'s requests, asked once the server answers its health check."""
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            connection.request("GET", "/api/health")
            if connection.getresponse().status == 200:
                _collect_from_now_on()
                for method, path in _WARM_UP_REQUESTS:
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    body = b'{"limit": 1}' if method == "POST" else None
                    connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
                    connection.getresponse().read()
                return
        except (OSError, http.client.HTTPException):  # not listening yet
            pass
        finally:
            connection.close()
        time.sleep(HEALTH_POLL_SECONDS)


def _exit_with_parent(parent: int) -> None:
    """Return never; once ``parent`` is no longer this process's parent (it died and this
    process was handed to another), stop this process."""
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_SECONDS)
    os._exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -P api_server.py PARENT_PID [--report FD] [--warm FD] -m MODULE [ARGS...]``: run
    ``MODULE`` as ``python -m MODULE ARGS...`` would, in this process, while a thread watches that
    ``PARENT_PID`` is still its parent. With ``--report FD``, first settle Prefect's settings and
    write what was found to the file descriptor ``FD`` (:func:`_settle`); exit if the user's
    settings name an API. With ``--port PORT`` among ``ARGS``, the server is warmed up as it
    starts (:func:`_warm_up`), with the garbage collector off until it answers; ``--warm FD`` is
    closed once it is warm (at once without ``--port``)."""
    parent, *arguments = sys.argv[1:] if argv is None else argv
    descriptors: dict[str, int] = {}
    while arguments[:1] in (["--report"], ["--warm"]) and len(arguments) > 1:
        descriptors[arguments[0]] = int(arguments[1])
        arguments = arguments[2:]
    if arguments[:1] != ["-m"] or len(arguments) < 2:
        raise SystemExit(f"usage: python -P {__file__} PARENT_PID [--report FD] [--warm FD] -m MODULE [ARGS...]")
    module, *arguments = arguments[1:]
    threading.Thread(target=_exit_with_parent, args=(int(parent),), name="exit-with-parent", daemon=True).start()
    port = int(arguments[arguments.index("--port") + 1]) if "--port" in arguments[:-1] else None
    warm = descriptors.get("--warm")
    if port is not None:
        gc.disable()  # until the server answers (_warm_up): see there
    if "--report" in descriptors and not _settle(descriptors["--report"]):
        return
    if port is not None:
        threading.Thread(target=_warm_up, args=(port, warm), name="warm-up", daemon=True).start()
    elif warm is not None:
        os.close(warm)
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
