"""Reach a Dask scheduler by its address, with errors that name it.

A user gives an address (``--dask-address``, ``dask_address=``, ``client="tcp://…"``); it is
checked for its form before anything connects (:class:`InputError` naming it) and the
scheduler must answer within :data:`CONNECT_TIMEOUT` seconds (:class:`ServiceError` naming
it), where ``distributed`` alone waits 30 s and then raises a bare ``OSError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Iterator, Sequence
from typing import Any

from fairpca_dist.exceptions import InputError, ServiceError
from fairpca_dist.extras import check_installed

__all__ = ["CONNECT_TIMEOUT", "check_address", "connect", "check_scheduler", "warm_workers"]

CONNECT_TIMEOUT = 10.0  # seconds a scheduler has to answer


def check_address(address: str) -> None:
    """Raise :class:`InputError` naming ``address`` unless it is ``[PROTOCOL://]HOST:PORT`` with a
    protocol ``distributed`` speaks (``tcp``, ``tls``, ``inproc``, ``ws``, ``wss``, ``ucx``)."""
    check_installed("distributed", extra="cluster", feature=f"connecting to the Dask scheduler {address!r}")
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends

    form = "give it as tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786, the address `dask scheduler` prints)"
    if str(address) != str(address).strip():
        raise InputError(f"dask address {address!r} has spaces around it; {form}")
    try:
        protocol, location = parse_address(str(address))
    except ValueError as error:
        raise InputError(f"dask address {address!r} is not an address of a Dask scheduler: {error}; {form}") from None
    if protocol not in backends:
        raise InputError(
            f"dask address {address!r} uses the protocol {protocol!r}, which Dask does not speak "
            f"(it speaks {', '.join(sorted(backends))}); {form}"
        )
    if protocol != "inproc":
        try:
            _, port = parse_host_port(location)
        except ValueError as error:
            raise InputError(
                f"dask address {address!r} is not an address of a Dask scheduler: {error}; {form}"
            ) from None
        if not 0 < port < 65536:
            raise InputError(f"dask address {address!r} has port {port}, outside 1-65535; {form}")


@contextlib.contextmanager
def connect(address: str, *, timeout: float = CONNECT_TIMEOUT) -> Iterator[Any]:
    """A ``distributed.Client`` of the scheduler at ``address`` while inside, closed after.

    Raises :class:`InputError` for a malformed address and :class:`ServiceError` naming it
    when no scheduler answers within ``timeout`` seconds.
    """
    check_address(address)  # first: it names the [cluster] extra when distributed is missing
    from distributed import Client

    _identify(address, timeout)
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as error:
        raise ServiceError(
            f"the Dask scheduler at {address} stopped answering while connecting: {' '.join(str(error).split())}"
        ) from error
    with client:
        yield client


def _identify(address: str, timeout: float) -> None:
    """Ask ``address`` who it is, as a client's first message does, in ``timeout`` seconds:
    :class:`ServiceError` unless a Dask scheduler answers. (A ``Client`` that fails to connect
    lingers and blocks the interpreter's exit for 20 s more; a server that is not a
    scheduler can make it allocate exabytes.)"""
    from distributed.core import rpc

    async def identity() -> Any:
        remote = rpc(address, timeout=timeout)
        try:
            return await asyncio.wait_for(remote.identity(), timeout)
        finally:
            await remote.close_rpc()

    try:
        answer = asyncio.run(identity())
    except RuntimeError as error:  # called from a running event loop: the Client will say
        if "running event loop" in str(error):
            return
        raise
    except (OSError, TimeoutError) as error:
        reason = " ".join(str(error).split()) or f"{type(error).__name__}: no answer"
        raise ServiceError(
            f"no Dask scheduler answers at {address} (waited {timeout:g} s: {reason}); start one (`dask scheduler`) or "
            "check the address (--dask-address, dask_address=)"
        ) from error
    except Exception as error:  # noqa: BLE001 - whatever a server that is not a scheduler makes it do
        answer = error
    if not (isinstance(answer, dict) and answer.get("type") == "Scheduler"):
        raise ServiceError(
            f"{address} answers, but not as a Dask scheduler ({type(answer).__name__}); check the "
            "address and port (--dask-address, dask_address=)"
        )


def check_scheduler(address: str | None, *, timeout: float = CONNECT_TIMEOUT) -> None:
    """Check, before any work starts, that a scheduler answers at ``address`` (None: nothing to
    check, the work runs in this process)."""
    if address:
        with connect(address, timeout=timeout):
            pass


def _import(modules: Sequence[str]) -> None:
    """Import ``modules`` (in the worker that runs it)."""
    for name in modules:
        importlib.import_module(name)


def warm_workers(client: Any, modules: Sequence[str]) -> None:
    """Have every worker of ``client`` import ``modules`` now, on one of its threads, while the
    driver plans the first pass. A new worker process otherwise imports the modules of a pass's
    functions when it unpickles its first task of the pass, on the pass's critical path. Workers
    that have them already return at once; nothing waits for the imports."""
    from distributed import fire_and_forget

    for address in client.scheduler_info()["workers"]:
        future = client.submit(_import, tuple(modules), workers=[address], allow_other_workers=False, pure=False)
        fire_and_forget(future)
