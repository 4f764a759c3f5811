"""How the flows meet Prefect on this machine: default settings and the temporary API server.

Without ``PREFECT_API_URL``, Prefect runs flows against a temporary ("ephemeral") API server
that it starts in a subprocess on the first API call. On a new machine that first start also
creates and migrates a SQLite database in ``PREFECT_HOME``: 8 s on an idle 2-core machine
here, 26 s under load, while Prefect waits only 20 s by default — so a first run could fail
with "Timed out while attempting to connect to ephemeral Prefect API server". Its telemetry
service also fails without internet access and, while the database is being created, prints
``database is locked`` tracebacks.

Before a command starts its API server (:func:`api_server`), and when a flow is called from
Python (the flows are made with :func:`flow`), it therefore sets, **only where the
user has not set them** (in the environment, a Prefect profile or ``prefect.toml``), the
defaults in :data:`PREFECT_DEFAULTS`. Nothing else of the user's Prefect configuration is
touched; with ``PREFECT_API_URL`` set,
flows run against that server and no temporary server starts.

A command starts the temporary server itself as early as it can, before it imports Prefect
(:func:`fairpca_dist.flows.api_server.launched_early`), hands it to :func:`api_server` and does
its own work (imports, checks) while the server starts, then work of its run until the server
is warm (:class:`Ready`): it says so, times it, and stops it when the command ends, interrupted
or not (see :mod:`fairpca_dist.flows.api_server`). Its flows
run there with the settings of :data:`TEMPORARY_SERVER_DEFAULTS` (again only where the user has
not set them): what a server that stops with the command never reads is not sent.

Importing this module sets up Prefect's logging (``prefect.main``): every flow module imports
it, and the command imports it before anything imports distributed (Prefect's logging set up
after distributed's drops distributed's log lines from ``fairpca pipeline -v``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, Protocol, TypeVar

import prefect.main  # noqa: F401  (Prefect's logging: see above)
from prefect import Flow

from fairpca_dist.flows.api_server import SERVER_DEFAULTS, TemporaryServer
from fairpca_dist.flows.api_server import new_database as _new_database

__all__ = [
    "PREFECT_DEFAULTS",
    "TEMPORARY_SERVER_DEFAULTS",
    "apply_prefect_defaults",
    "flow",
    "ApiServer",
    "Ready",
    "api_server",
    "check_api",
    "check_configured_api",
    "API_TIMEOUT",
]

PREFECT_DEFAULTS: dict[str, str] = {
    # Wait up to 3 minutes for the temporary server (first start: database creation).
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    # No usage telemetry from the temporary server (it fails offline and locks the database).
    **SERVER_DEFAULTS,
}


TEMPORARY_SERVER_DEFAULTS: dict[str, Any] = {
    # No flow-run heartbeats: they let a server that outlives a run find it crashed; the temporary
    # server dies with the command (which marks its runs crashed itself), and each flow's end
    # waited up to 1 s for its heartbeat thread. None cannot be written as an environment
    # variable: these go into Prefect's settings context of the command, where the flows run.
    "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": None,
}
"""Settings for the flows of a command on its own temporary server (:func:`api_server`), set
only where the user has not set them; a server of the user's (``PREFECT_API_URL``) keeps Prefect's."""


def _set_by_user() -> dict[str, str]:
    """The Prefect settings set in the environment, a profile, ``prefect.toml`` or ``.env`` (or
    in the current settings context), by their environment variable names."""
    from prefect.settings import get_current_settings

    return get_current_settings().to_environment_variables(exclude_unset=True)


def apply_prefect_defaults(*, configured: dict[str, str] | None = None) -> dict[str, str]:
    """Set each of :data:`PREFECT_DEFAULTS` the user has not set; return those set.

    They go into ``os.environ`` (so the server subprocess inherits them) and Prefect's settings
    are refreshed, so this works whether or not Prefect was imported before. ``configured``: the
    user's settings by their variables' names, if the caller has read them (:func:`_set_by_user`:
    0.03-0.08 s each time).
    """
    import prefect.context

    if all(name in os.environ for name in PREFECT_DEFAULTS):  # applied before, or the user's: nothing to do
        return {}  # (without reading every setting of the user's again: 0.03-0.05 s at each flow call)
    configured = _set_by_user() if configured is None else configured
    applied = {
        name: value for name, value in PREFECT_DEFAULTS.items() if name not in configured and name not in os.environ
    }
    if applied:
        os.environ.update(applied)
        prefect.context.refresh_global_settings_context()
    return applied


P = ParamSpec("P")
R = TypeVar("R")


class _DefaultsFlow(Flow[P, R]):
    """A Prefect flow whose every call from Python first applies :data:`PREFECT_DEFAULTS`
    (:func:`apply_prefect_defaults`): calling ``pipeline(...)`` in a script starts Prefect's
    temporary server with them, as ``fairpca pipeline`` does. Runs started by a Prefect worker
    (deployments) do not go through ``__call__``: they use the worker's own settings."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        apply_prefect_defaults()
        return super().__call__(*args, **kwargs)


def flow(**options: Any) -> Callable[[Callable[P, R]], Flow[P, R]]:
    """:func:`prefect.flow` for the library's flows: the same ``options``, and each call of the
    flow applies :data:`PREFECT_DEFAULTS` first (only those the user has not set)."""

    def decorate(function: Callable[P, R]) -> Flow[P, R]:
        return _DefaultsFlow(fn=function, **options)

    return decorate


API_TIMEOUT = 10.0
"""How long a Prefect API named by ``PREFECT_API_URL`` has to answer its health check."""

DRAIN_SECONDS = 10.0
"""How long a command waits, before it stops its temporary server, for Prefect to send the
run logs and events it holds."""


@dataclass(frozen=True)
class ApiServer:
    """The Prefect API the flows will use, and what it took to get it: ``seconds`` from the
    temporary server's launch until it answered, ``waited`` of them spent by the command
    waiting for it (the rest ran beside the command's own work); ``meanwhile``, the seconds
    ``ready()`` spent on the command's own work (:class:`Ready`) before it waited."""

    url: str
    temporary: bool
    seconds: float
    created_database: bool
    waited: float = 0.0
    meanwhile: float = 0.0

    def describe(self) -> str:
        if not self.temporary:
            return f"Prefect API at {self.url}"
        first = ", database created (first run)" if self.created_database else ""
        return f"temporary Prefect API server started in {self.seconds:.1f} s{first}"


class Ready(Protocol):
    """``ready(meanwhile)`` of :func:`api_server`: returns the API once it answers. Before it
    waits for a temporary server, it imports what Prefect imports at a process's first flow
    run, then calls each of ``meanwhile`` in turn for as long as the server is not up and warm
    (:meth:`~fairpca_dist.flows.api_server.TemporaryServer.answers`): work the command would do
    later anyway (its later imports, loading compiled code), done while it would otherwise wait
    (a temporary server takes 5-6 s of a core to start and warm up, the command's own imports
    3-5 s of the other). Once the server is warm, the rest is left for later: each piece of work
    delays the run by at most its own length."""

    def __call__(self, meanwhile: Sequence[Callable[[], object]] = ()) -> ApiServer: ...


def check_configured_api() -> None:
    """:func:`check_api` of the API ``PREFECT_API_URL`` names, if it names one."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if url:
        check_api(str(url))


def check_api(url: str, *, timeout: float = API_TIMEOUT) -> None:
    """Raise :class:`~fairpca_dist.exceptions.ServiceError` naming ``url`` unless the Prefect API
    there answers its health check within ``timeout`` seconds (Prefect itself raises a bare
    ``RuntimeError: Failed to reach API`` at the first flow run). Asked through Prefect's own
    client, so that its settings (TLS certificates, headers, an API key) apply."""
    import httpx
    from prefect.client.orchestration import get_client

    from fairpca_dist.exceptions import ServiceError

    advice = (
        "start it (`prefect server start`), or unset PREFECT_API_URL to run on a temporary server of this command's own"
    )
    try:
        with get_client(sync_client=True, httpx_settings={"timeout": timeout}) as client:
            error = client.api_healthcheck()
    except (httpx.HTTPError, ValueError) as raised:  # a URL httpx cannot use
        error = raised
    if isinstance(error, httpx.HTTPStatusError):
        raise ServiceError(
            f"{url} (PREFECT_API_URL) answers, but not as a Prefect API (health check: HTTP "
            f"{error.response.status_code}): check the URL, which ends in /api, or {advice}"
        ) from error
    if error is not None:
        raise ServiceError(
            f"no Prefect API answers at {url} (PREFECT_API_URL; {type(error).__name__}: "
            f"{' '.join(str(error).split()) or 'no answer'}): {advice}"
        ) from error


def _running_prefect_server() -> str | None:
    """The API URL of Prefect's own temporary server if one already runs for this process (a
    flow called earlier without :func:`api_server` started it), else None. Not imported, none runs."""
    module = sys.modules.get("prefect.server.api.server")
    server = module.SubprocessASGIServer._instances.get(None) if module is not None else None
    return str(server.api_url) if server is not None and server.running else None


def _unset_defaults(defaults: dict[str, Any], configured: dict[str, str]) -> dict[Any, Any]:
    """The settings of ``defaults`` (named as environment variables) not among the user's
    ``configured`` ones (:func:`_set_by_user`), as Prefect setting objects → values."""
    import prefect.settings

    return {getattr(prefect.settings, name): value for name, value in defaults.items() if name not in configured}


@contextlib.contextmanager
def api_server(
    announce: Callable[[str], None] | None = None, *, launched: TemporaryServer | None = None
) -> Iterator[Ready]:
    """Launch Prefect's temporary API server now, unless ``PREFECT_API_URL`` names one, and
    stop it on leaving; yield ``ready`` (:class:`Ready`), which waits until the API answers and
    describes it.
    ``launched``: a temporary server the command launched before it imported Prefect
    (:func:`fairpca_dist.flows.api_server.launched_early`), used instead of a new one, and
    stopped on leaving, or at once when the user's settings name an API.

    The server starts beside the command: call ``ready()`` when the flows are about to run,
    after the command's own imports and checks (the temporary server takes 1.5-3 s to start,
    far longer on a new Prefect home, which gets its database). The flows would start one on
    their first API call anyway (Prefect keeps one per process); starting it first lets a
    command say what it is doing and how long it took, and this one
    (:class:`fairpca_dist.flows.api_server.TemporaryServer`) is safe from interrupts: a
    terminal's Ctrl-C does not reach it, so the flow runs inside are marked crashed before it
    stops, and it exits by itself if this process dies. ``announce`` receives one line as a temporary
    server starts. ``ready()`` raises :class:`~fairpca_dist.exceptions.ServiceError` when the
    server does not come up (or when ``PREFECT_API_URL`` names an API that does not answer).

    While inside, flow and task runs reach this API by its URL (``PREFECT_API_URL`` in the
    environment and in Prefect's settings, for threads Prefect starts without this context
    too), task runs on Dask workers included (they receive the flow's settings with each task).
    A temporary server is otherwise known only to the process that started it: every worker
    of an existing cluster (``--dask-address``) would start one of its own, on the same
    database, and the run stalled (measured: no progress for 7 minutes on a 10M-row table).
    The settings of :data:`TEMPORARY_SERVER_DEFAULTS` the user has not set apply too.
    """
    import prefect.context
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    users = _set_by_user()  # read once, for the defaults here and the flows' (ready)
    apply_prefect_defaults(configured=users)
    settings = get_current_settings()
    configured = settings.api.url or _running_prefect_server()
    if configured and launched is not None:
        launched.stop()  # not needed (it saw the user's API too, and exited)
    if configured:

        def check(meanwhile: Sequence[Callable[[], object]] = ()) -> ApiServer:  # nothing to wait for
            if settings.api.url:
                check_api(str(configured))
            return ApiServer(str(configured), temporary=not settings.api.url, seconds=0.0, created_database=False)

        yield check
        return
    timeout = settings.server.ephemeral.startup_timeout_seconds
    server = launched or TemporaryServer()
    # a launched server has looked at its database already (and may have created it since)
    new_database = bool(server.settled(timeout).get("new_database")) if launched else _new_database(settings)
    if announce is not None:
        first = f" (first run: creating its database in {settings.home}, ~10-30 s)" if new_database else ""
        announce(f"starting a temporary API server{first} ...")
    found: list[ApiServer] = []
    with contextlib.ExitStack() as stack:

        def ready(meanwhile: Sequence[Callable[[], object]] = ()) -> ApiServer:
            if not found:
                began = time.perf_counter()
                _import_first_run_modules()  # while the server may still be starting
                for work in meanwhile:
                    if server.answers():
                        break
                    work()
                waiting = time.perf_counter()
                seconds = server.wait(timeout)
                waited = time.perf_counter() - waiting
                found.append(ApiServer(server.api_url, True, seconds, new_database, waited, waiting - began))
                # Threads Prefect starts without this context read the global settings: they get the URL too.
                os.environ["PREFECT_API_URL"] = server.api_url
                prefect.context.refresh_global_settings_context()
                updates = {PREFECT_API_URL: server.api_url, **_unset_defaults(TEMPORARY_SERVER_DEFAULTS, users)}
                stack.enter_context(temporary_settings(updates=updates))
            return found[0]

        def send_what_is_held() -> None:
            if found:  # what is logged from now on would race the server's stop
                _drop_logs_to(found[0].url)
            _drain_prefect_workers()

        stack.callback(_restore_environment, "PREFECT_API_URL", os.environ.get("PREFECT_API_URL"))
        if launched is None:
            server.launch()  # an interrupt from here on stops it too
        stack.callback(server.stop)
        stack.callback(send_what_is_held)
        yield ready


_STOPPED_SERVERS: set[str] = set()  # API URLs of temporary servers this process has stopped


def _drop_logs_to(url: str) -> None:
    """From now on, drop Prefect's run logs addressed to the API at ``url`` (a server about to stop).

    A task that outlives its interrupted flow (a step on the cluster's threads, which no signal
    stops) may still log after the command has sent its logs and stopped its server: Prefect
    would fail to send that line and write ``--- Error logging to API ---`` on standard error.
    Logs to any other API are sent as before (through Prefect's log sink hook, installed once
    unless another sink is there)."""
    from prefect.logging import handlers

    _STOPPED_SERVERS.add(url)
    if getattr(handlers, "_api_log_sink", None) is None:
        handlers.set_api_log_sink(_send_unless_stopped)


def _send_unless_stopped(log: dict[str, Any]) -> None:
    """Prefect's ``emit_api_log``, but for logs to the servers of :data:`_STOPPED_SERVERS`."""
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value() not in _STOPPED_SERVERS:
        APILogWorker.instance().send(log)


def _import_first_run_modules() -> None:
    """Import what Prefect imports at the first flow call of a process: its flow engine and
    FastAPI's encoder of flow parameters (``Flow.serialize_parameters``); 0.2-0.5 s that a
    command waiting for its server spends better now than once the server is up."""
    import fastapi.encoders  # noqa: F401
    import prefect.flow_engine  # noqa: F401


def _restore_environment(name: str, value: str | None) -> None:
    """Give the variable ``name`` its former ``value`` (None: unset), and Prefect's settings too."""
    import prefect.context

    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    prefect.context.refresh_global_settings_context()


def _drain_prefect_workers() -> None:
    """Let Prefect's log and event workers send what they hold (at exit, they would try a stopped
    server for a minute), with a bound: a stuck send must not hold the command. Their progress
    warnings while they drain ("Still processing items: 2 items remaining...") are not shown:
    they are the normal end of a run; a failed send is still logged, as an error."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        logger = logging.getLogger(worker.__name__)  # the workers' own logger (prefect's _QueueServiceBase)
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            worker.drain_all(timeout=DRAIN_SECONDS)
        finally:
            logger.setLevel(level)
