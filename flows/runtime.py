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

A command starts the temporary server itself, with :func:`api_server`: it says so, times it,
and stops it when the command ends, interrupted or not (see :mod:`fairpca_dist.flows.api_server`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from prefect import Flow

__all__ = [
    "PREFECT_DEFAULTS",
    "apply_prefect_defaults",
    "flow",
    "ApiServer",
    "api_server",
    "check_api",
    "check_configured_api",
    "API_TIMEOUT",
]

PREFECT_DEFAULTS: dict[str, str] = {
    # Wait up to 3 minutes for the temporary server (first start: database creation).
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    # No usage telemetry from the temporary server (it fails offline and locks the database).
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}


def apply_prefect_defaults() -> dict[str, str]:
    """Set each of :data:`PREFECT_DEFAULTS` the user has not set; return those set.

    They go into ``os.environ`` (so the server subprocess inherits them) and Prefect's settings
    are refreshed, so this works whether or not Prefect was imported before.
    """
    import prefect.context
    from prefect.settings import get_current_settings

    configured = get_current_settings().to_environment_variables(exclude_unset=True)
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
    """The Prefect API the flows will use, and what it took to get it."""

    url: str
    temporary: bool
    seconds: float
    created_database: bool

    def describe(self) -> str:
        if not self.temporary:
            return f"Prefect API at {self.url}"
        first = ", database created (first run)" if self.created_database else ""
        return f"temporary Prefect API server started in {self.seconds:.1f} s{first}"


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


@contextlib.contextmanager
def api_server(announce: Callable[[str], None] | None = None) -> Iterator[ApiServer]:
    """Start Prefect's temporary API server now, unless ``PREFECT_API_URL`` names one, and
    stop it on leaving.

    The flows would start one on their first API call anyway (Prefect keeps one per process);
    starting it first lets a command say what it is doing and how long it took, and this one
    (:class:`fairpca_dist.flows.api_server.TemporaryServer`) is safe from interrupts: a terminal's Ctrl-C
    does not reach it, so the flow runs inside are marked crashed before it stops, and it
    exits by itself if this process dies. ``announce`` receives one line before a temporary
    server starts. Raises what Prefect raises when the server does not come up.

    While inside, flow and task runs reach this API by its URL, task runs on Dask workers
    included (they receive the flow's settings with each task). A temporary server is otherwise
    known only to the process that started it: every worker of an existing cluster
    (``--dask-address``) would start one of its own, on the same database, and the run stalled
    (measured: no progress for 7 minutes on a 10M-row table).
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    apply_prefect_defaults()
    settings = get_current_settings()
    if settings.api.url:
        check_api(str(settings.api.url))
        yield ApiServer(str(settings.api.url), temporary=False, seconds=0.0, created_database=False)
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    from fairpca_dist.flows.api_server import TemporaryServer

    database = Path(settings.home) / "prefect.db"
    connection = settings.server.database.connection_url  # set by Prefect's defaults
    url = connection.get_secret_value() if connection is not None else ""
    new_database = url.startswith("sqlite") and str(database) in url and not database.exists()
    server = TemporaryServer()
    ours = not server.running  # else Prefect's own, started earlier in this process: not ours to stop
    if announce is not None and ours:
        first = f" (first run: creating its database in {settings.home}, ~10-30 s)" if new_database else ""
        announce(f"starting a temporary API server{first} ...")
    started = time.perf_counter()
    try:
        server.start()  # an interrupt while it starts stops it too
        found = ApiServer(
            server.api_url, temporary=True, seconds=time.perf_counter() - started, created_database=new_database
        )
        with temporary_settings(updates={PREFECT_API_URL: found.url}):
            yield found
    finally:
        if ours:
            # Prefect's log and event workers send what they hold first (at exit, they would try
            # a stopped server for a minute), with a bound: a stuck send must not hold the command.
            for worker in (APILogWorker, EventsWorker):
                worker.drain_all(timeout=DRAIN_SECONDS)
            server.stop()
