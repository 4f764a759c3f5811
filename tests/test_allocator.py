"""glibc's allocator in a pass's tasks (:mod:`fairpca_dist.engine.allocator`): in a process
started as ``distributed``'s nanny starts a worker (``MALLOC_TRIM_THRESHOLD_`` set), a
numpy temporary freed inside a task is reused from the heap instead of being mapped afresh,
and the environment's behaviour is back once the last task ends. Observed through glibc's
own accounting (``mallinfo2``: bytes in mapped chunks), in a fresh interpreter each time, on a
real Dask worker too."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client, LocalCluster

from fairpca_dist.engine import allocator
from fairpca_dist.engine.sources import map_partitions, open_table

glibc = pytest.mark.skipif(
    allocator._glibc() is None or not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc >= 2.33 only"
)

# Bytes in glibc's mapped chunks (mallinfo2().hblkhd) while a 4 MiB array allocated after a
# 4 MiB array was freed is alive: inside the block and outside it.
PROBE = textwrap.dedent(
    """
    import ctypes, json, threading
    import numpy as np
    from fairpca_dist.engine.allocator import reusing_freed_memory

    FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()

    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in FIELDS]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info

    def mapped_while_alive():
        np.ones(2**19)  # 4 MiB, freed at once
        again = np.ones(2**19)
        return libc.mallinfo2().hblkhd >= again.nbytes

    result = {"before": mapped_while_alive()}
    with reusing_freed_memory():
        with reusing_freed_memory():  # nested: the thresholds stay until the outer block ends
            pass
        result["inside"] = mapped_while_alive()
        thread = threading.Thread(target=lambda: result.update(thread=mapped_while_alive()))
        thread.start(); thread.join()
    result["after"] = mapped_while_alive()
    print(json.dumps(result))
    """
)


def _probe(**env: str) -> dict[str, bool]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | env
    done = subprocess.run([sys.executable, "-c", PROBE], env=environment, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@glibc
def test_a_nanny_started_process_reuses_freed_memory_inside_a_task_only() -> None:
    assert _probe(MALLOC_TRIM_THRESHOLD_="65536") == {"before": True, "inside": False, "thread": False, "after": True}


@glibc
def test_without_the_nanny_setting_nothing_is_changed() -> None:
    # glibc's adaptive threshold reuses the freed 4 MiB by itself; the block leaves it alone
    assert _probe() == {"before": False, "inside": False, "thread": False, "after": False}


@glibc
@pytest.mark.parametrize("value", ["0", "lots"])  # glibc reads "lots" as 0: its adaptive threshold is off all the same
def test_any_nanny_like_setting_is_handled(value: str) -> None:
    assert _probe(MALLOC_TRIM_THRESHOLD_=value) == {"before": True, "inside": False, "thread": False, "after": True}


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _fresh_temporary_mapped(part: pd.DataFrame, partition: object) -> bool:
    """On the worker, inside a pass's task: is a 4 MiB temporary allocated after one was freed mapped afresh?"""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    np.ones(2**19)
    again = np.ones(2**19)
    return bool(libc.mallinfo2().hblkhd >= again.nbytes)


@glibc
def test_every_task_of_a_pass_on_a_nanny_worker_reuses_freed_memory() -> None:
    frame = pd.DataFrame({"x": np.arange(40.0), "g": np.arange(40) % 2})
    table = open_table(dd.from_pandas(frame, npartitions=2), sensitive_feature="g")
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        assert client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_")) != {}  # the nanny's setting
        tasks = map_partitions(table.frame, _fresh_temporary_mapped)
        assert client.compute(tasks, sync=True) == [False, False]
