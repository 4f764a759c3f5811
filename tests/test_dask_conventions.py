"""compute_moments follows dask's conventions: a lazy result for dask.compute, the configured
scheduler, per-row labels as Series next to a dask DataFrame, and only public dask interfaces."""

from __future__ import annotations

import functools
import os
import re
import threading
import warnings
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from dask.callbacks import Callback
from dask.delayed import Delayed
from test_moments import assert_matches_reference

from fairpca_dist import GroupError, GroupMoments, InputError, SchemaError, compute_moments
from fairpca_dist.engine.cells import CellMoments, HashCells

FEATURES = ["a", "b", "c"]
ENGINE = Path(__file__).resolve().parents[1] / "fairpca_dist" / "engine"


@pytest.fixture
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    data = pd.DataFrame(rng.normal(size=(600, 3)) * [1.0, 10.0, 0.1] + 1e6, columns=FEATURES)
    return data.assign(group=rng.choice(["f", "m", "x"], size=600), weight=rng.uniform(0.5, 2.0, size=600))


def _reference(frame: pd.DataFrame, *, weighted: bool = False) -> GroupMoments:
    weights = frame["weight"].to_numpy() if weighted else None
    return GroupMoments.from_arrays(
        frame[FEATURES].to_numpy(), frame["group"].to_numpy(), weights=weights, feature_names=FEATURES
    )


def _assert_close(found: GroupMoments, expected: GroupMoments) -> None:
    assert found.groups == expected.groups
    np.testing.assert_array_equal(found.count, expected.count)
    np.testing.assert_allclose(found.weight, expected.weight, rtol=1e-10)
    np.testing.assert_allclose(found.mean, expected.mean, rtol=1e-10)
    np.testing.assert_allclose(found.scatter, expected.scatter, rtol=1e-10, atol=1e-10 * np.abs(expected.scatter).max())


class _Tasks(Callback):
    """Counts the tasks dask's local schedulers start while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.started = 0

    def _pretask(self, key, dsk, state) -> None:
        self.started += 1


# ---------------------------------------------------------------- compute=False


def test_lazy_moments_compute_together_with_other_work(frame):
    ddf = dd.from_pandas(frame, npartitions=5)
    with _Tasks() as tasks:
        lazy = compute_moments(ddf, sensitive_feature="group", features=FEATURES, compute=False)
    assert isinstance(lazy, Delayed)
    assert tasks.started == 0  # nothing ran before dask.compute
    eager = compute_moments(ddf, sensitive_feature="group", features=FEATURES)
    with _Tasks() as tasks, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Computing mixed collections", UserWarning)
        moments, total = dask.compute(lazy, ddf.a.sum())
    assert tasks.started > ddf.npartitions  # one scheduler run did both
    assert isinstance(moments, GroupMoments)
    _assert_close(moments, eager)
    _assert_close(moments, _reference(frame))
    assert total == pytest.approx(frame.a.sum(), rel=1e-12)


def test_lazy_moments_of_arrays_paths_and_cells(frame, tmp_path):
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    x, labels = frame[FEATURES].to_numpy(), frame["group"].to_numpy()
    lazy_array = compute_moments(x, sensitive_feature=labels, feature_names=FEATURES, compute=False)
    lazy_path = compute_moments(str(path), sensitive_feature="group", features=FEATURES, compute=False)
    cells = HashCells(n_cells=5, key_columns=("a",), seed=1)
    lazy_cells = compute_moments(str(path), sensitive_feature="group", features=FEATURES, cells=cells, compute=False)
    from_array, from_path, by_cell = dask.compute(lazy_array, lazy_path, lazy_cells)
    _assert_close(from_array, _reference(frame))
    _assert_close(from_path, _reference(frame))
    assert isinstance(by_cell, CellMoments)
    assert list(by_cell) == list(range(5))
    _assert_close(by_cell.total(), _reference(frame))


def test_lazy_moments_check_the_schema_now_and_the_values_when_computed(frame):
    ddf = dd.from_pandas(frame, npartitions=3)
    with pytest.raises(SchemaError, match="'agge' not found"):
        compute_moments(ddf, sensitive_feature="group", features=["agge"], compute=False)
    one_group = compute_moments(ddf.assign(group="f"), sensitive_feature="group", features=FEATURES, compute=False)
    with pytest.raises(GroupError, match="1 group"):
        dask.compute(one_group)
    with pytest.raises(InputError, match=r"compute=False\) takes no client="):
        compute_moments(ddf, sensitive_feature="group", client="tcp://127.0.0.1:8786", compute=False)
    with pytest.raises(InputError, match=r"compute=False\) takes no progress="):
        compute_moments(ddf, sensitive_feature="group", progress=True, compute=False)


# ---------------------------------------------------------------- the configured scheduler


def _where(part_index: int) -> pd.DataFrame:
    """Rows that record where they were made: the process, and whether in its main thread."""
    rng = np.random.default_rng(part_index)
    return pd.DataFrame(
        {
            "pid": float(os.getpid()),
            "main_thread": float(threading.current_thread() is threading.main_thread()),
            "noise": rng.normal(size=40),
            "group": np.tile(["f", "m"], 20),
        }
    )


_META = _where(0).iloc[:0]


def _probe_moments(**options) -> GroupMoments:
    probe = dd.from_map(_where, range(4), meta=_META)  # dask computes no meta: nothing runs before the pass
    return compute_moments(probe, sensitive_feature="group", features=["pid", "main_thread", "noise"], **options)


def _ran_in(moments: GroupMoments) -> tuple[set[int], float]:
    """The processes the rows were made in, and the share made in a main thread."""
    pid, main_thread = moments.global_mean[0], moments.global_mean[1]
    return {int(round(pid))}, float(main_thread)


def test_the_synchronous_scheduler_is_respected():
    with dask.config.set(scheduler="synchronous"), _Tasks() as tasks:
        moments = _probe_moments()
    assert _ran_in(moments) == ({os.getpid()}, 1.0)  # every task in this thread
    assert tasks.started > 0
    with dask.config.set(scheduler="single-threaded"):
        assert _ran_in(_probe_moments()) == ({os.getpid()}, 1.0)


@pytest.mark.parametrize("config", [None, "threads", "threading", "dask.distributed"])
def test_threads_by_configuration_or_by_default(config):
    with dask.config.set(scheduler=config):
        moments = _probe_moments()
    assert _ran_in(moments) == ({os.getpid()}, 0.0)  # in this process, never in its main thread


def test_the_threaded_scheduler_uses_the_configured_number_of_workers():
    seen: set[int] = set()

    def record(part_index: int) -> pd.DataFrame:
        seen.add(threading.get_ident())
        return _where(part_index)

    with dask.config.set(scheduler="threads", num_workers=1):
        compute_moments(
            dd.from_map(record, range(6), meta=_META), sensitive_feature="group", features=["noise"], split_every=2
        )
    assert len(seen) == 1


def test_the_processes_scheduler_is_respected():
    with dask.config.set(scheduler="processes", num_workers=2):
        moments = _probe_moments()
    processes, _ = _ran_in(moments)
    assert os.getpid() not in processes


def test_a_configured_get_function_is_used():
    calls = []

    def get(dsk, keys, **kwargs):
        calls.append(keys)
        return dask.get(dsk, keys, **kwargs)

    with dask.config.set(scheduler=get):
        moments = _probe_moments()
    assert calls and _ran_in(moments) == ({os.getpid()}, 1.0)


def test_an_unknown_configured_scheduler_is_named():
    with dask.config.set(scheduler="trheads"), pytest.raises(InputError, match="'trheads'"):
        _probe_moments()


def test_a_client_given_wins_over_the_configuration(dask_cluster):
    with dask.config.set(scheduler="synchronous"):
        moments = _probe_moments(client=dask_cluster)
    processes, _ = _ran_in(moments)
    assert os.getpid() not in processes  # on the cluster's worker processes


# ---------------------------------------------------------------- labels as Series


@pytest.mark.parametrize("divisions", ["known", "unknown"])
def test_labels_and_weights_as_a_dask_series_of_the_same_frame(frame, divisions):
    ddf = dd.from_pandas(frame, npartitions=4)
    if divisions == "unknown":
        ddf = ddf.clear_divisions()
    moments = compute_moments(ddf[FEATURES], sensitive_feature=ddf["group"])
    _assert_close(moments, _reference(frame))
    weighted = compute_moments(ddf[FEATURES], sensitive_feature=ddf["group"], sample_weight=ddf["weight"])
    _assert_close(weighted, _reference(frame, weighted=True))


def test_labels_as_a_pandas_series_aligned_by_index_with_a_frame_of_known_divisions(frame):
    ddf = dd.from_pandas(frame, npartitions=4)
    shuffled = frame["group"].sample(frac=1.0, random_state=0)  # aligned by index, not by position
    moments = compute_moments(ddf[FEATURES], sensitive_feature=shuffled)
    _assert_close(moments, _reference(frame))


def test_labels_whose_index_misses_the_frames_rows_name_the_index(frame):
    ddf = dd.from_pandas(frame, npartitions=4)
    elsewhere = frame["group"].iloc[::2]  # labels for every other row only: the rest are missing once aligned
    with pytest.raises(
        GroupError, match=r"missing label\(s\) in partition \d \(a Series of labels is aligned .* by index"
    ):
        compute_moments(ddf[FEATURES], sensitive_feature=elsewhere)


def test_labels_as_a_dask_series_partitioned_otherwise_with_known_divisions(frame):
    ddf = dd.from_pandas(frame, npartitions=4)
    labels = dd.from_pandas(frame["group"], npartitions=7)
    _assert_close(compute_moments(ddf[FEATURES], sensitive_feature=labels), _reference(frame))


def test_labels_that_cannot_be_aligned_are_refused_with_the_remedy(frame):
    unknown = dd.from_pandas(frame, npartitions=4).clear_divisions()
    with pytest.raises(SchemaError, match=r"divisions are unknown.*pass the column's name"):
        compute_moments(unknown[FEATURES], sensitive_feature=frame["group"])
    other = dd.from_pandas(frame["group"], npartitions=3).clear_divisions()
    with pytest.raises(SchemaError, match=r"3 partition\(s\) without known divisions, and the DataFrame has 4"):
        compute_moments(unknown[FEATURES], sensitive_feature=other)
    # the same number of partitions, but other rows in them: found by the tasks, never misread
    reordered = dd.from_pandas(frame["group"].iloc[::-1], npartitions=4, sort=False)
    with pytest.raises(SchemaError, match=r"does not line up with the rows of partition \d"):
        compute_moments(unknown[FEATURES], sensitive_feature=reordered)
    with pytest.raises(SchemaError, match="in-memory array, which cannot be aligned"):
        compute_moments(unknown[FEATURES], sensitive_feature=frame["group"].to_numpy())


# ---------------------------------------------------------------- public dask interfaces only

_PRIVATE = re.compile(r"dask\._|\._name\b|\._meta\b|\._expr\b|_task_spec")


@pytest.mark.parametrize("module", ["passes.py", "sources.py", "cluster.py", "progress.py"])
def test_no_private_dask_interface_is_used(module):
    found = [
        f"{module}:{number}: {line.strip()}"
        for number, line in enumerate((ENGINE / module).read_text().splitlines(), 1)
        if _PRIVATE.search(line)
    ]
    assert not found


def test_the_public_dask_interfaces_the_passes_rely_on(frame):
    """What sources.map_partitions builds on; fails loudly on a dask version that changes one.

    ``DataFrame.to_delayed()`` gives one task per partition, whose graph entry
    ``dask.core.get`` runs from a one-entry graph with its dependencies' values as ``cache``;
    ``dask.core.get_dependencies`` lists those; ``dask.delayed(value, name=, traverse=False)``
    is a literal, and ``partition_info`` reaches a function of ``dd.map_partitions``."""
    from dask.core import get, get_dependencies

    ddf = dd.from_pandas(frame, npartitions=3)[FEATURES]
    parts = ddf.to_delayed()
    assert len(parts) == 3
    graph = dict(parts[1].__dask_graph__())
    node = graph[parts[1].key]
    depends = get_dependencies(graph, parts[1].key)
    cache = {key: get(graph, [key])[0] for key in depends}
    part = get({parts[1].key: node}, [parts[1].key], cache=cache)[0]
    pd.testing.assert_frame_equal(part, ddf.partitions[1].compute())

    literal = dask.delayed((len, [1, 2]), name="a-literal", traverse=False)
    assert literal.key == "a-literal" and literal.compute() == (len, [1, 2])

    def number(part, partition_info=None):
        return part.assign(number=partition_info["number"])

    meta = frame[FEATURES].iloc[:0].assign(number=0)
    numbers = dd.map_partitions(number, ddf, align_dataframes=False, meta=meta).compute()["number"]
    assert sorted(set(numbers)) == [0, 1, 2]


def test_map_partitions_reads_inside_the_consuming_task(frame):
    """One task per partition reads it and applies the function (no read task of its own)."""
    from fairpca_dist.engine.sources import map_partitions

    ddf = dd.from_pandas(frame, npartitions=4)
    tasks = map_partitions(ddf, lambda part, partition, *args: (partition.index, len(part)))
    with _Tasks() as started:
        results = dask.compute(tasks, scheduler="synchronous")[0]
    assert sorted(results) == [(i, 150) for i in range(4)]
    assert started.started <= 4 + 1  # the four partitions' tasks (and, for some dask versions, their shared arguments)


def test_moments_of_a_dask_frame_match_numpy_whatever_the_scheduler(frame):
    x, labels = frame[FEATURES].to_numpy(), frame["group"].to_numpy()
    for scheduler in ("synchronous", "threads"):
        with dask.config.set(scheduler=scheduler):
            moments = compute_moments(
                dd.from_pandas(frame, npartitions=3), sensitive_feature="group", features=FEATURES
            )
        assert_matches_reference(moments, x, labels)


def test_the_dask_internals_of_sizing_and_sliced_parquet_reads_are_still_there(frame, tmp_path):
    """fairpca_dist.engine.memory (sizing a pass before it runs on a cluster) and
    fairpca_dist.engine.parquet_slices (reading large row groups in slices) read dask-expr's plan
    of a table, which dask does not publish: this names what a dask version changed, rather than
    letting a pass fail or mis-size somewhere else."""
    from dask.dataframe.dask_expr.io.io import FromMap, FromPandas
    from dask.dataframe.dask_expr.io.parquet import ReadParquetFSSpec

    path = tmp_path / "t.parquet"
    frame.to_parquet(path, row_group_size=100)
    read = dd.read_parquet(str(path), split_row_groups="adaptive", blocksize="64 MiB")
    missing = []
    if not isinstance(read.expr, ReadParquetFSSpec):
        missing.append(f"read_parquet's expression is a {type(read.expr).__name__}, not ReadParquetFSSpec")
    else:
        info = getattr(read.expr, "_dataset_info", None)
        if not isinstance(info, dict):
            missing.append("ReadParquetFSSpec._dataset_info")
        else:
            wanted = {"plan", "fs", "blocksize", "split_row_groups", "partition_names", "filters", "index_cols"}
            missing += [f"_dataset_info[{key!r}]" for key in sorted(wanted - set(info))]
            plan = info.get("plan", {})
            missing += [
                f"_dataset_info['plan'][{key!r}]" for key in ("parts", "statistics", "empty") if key not in plan
            ]
        missing += [f"ReadParquetFSSpec.{name}" for name in ("_io_func", "_name") if not hasattr(read.expr, name)]
    if not hasattr(read, "_meta"):
        missing.append("DataFrame._meta")
    in_memory = dd.from_pandas(frame, npartitions=3)
    operations = list(in_memory.expr.find_operations(FromPandas))
    if not operations or not hasattr(operations[0], "_locations"):
        missing.append("FromPandas._locations (found by Expr.find_operations)")
    from dask.dataframe.dask_expr._util import _BackendData

    if not isinstance(getattr(_BackendData, "_token", None), functools.cached_property):
        missing.append("_BackendData._token (a cached property: the in-memory frame's name)")
    mapped = dd.from_map(lambda i: frame.iloc[:2], range(2), meta=frame.iloc[:0])
    if not list(mapped.expr.find_operations(FromMap)):
        missing.append("FromMap (found by Expr.find_operations)")
    assert not missing, f"dask {dask.__version__} changed internals the engine reads: {missing}"


def test_an_in_memory_frame_is_split_like_from_pandas_but_named_not_hashed(frame):
    # dd.from_pandas copies a frame whole and hashes its values for the collection's name
    # (seconds for a frame of a GB); the passes split it the same way under a random name.
    from fairpca_dist.engine.sources import _frame_in_memory

    ours, again = _frame_in_memory(frame, 250), _frame_in_memory(frame, 250)
    theirs = dd.from_pandas(frame, chunksize=250, sort=False)
    assert ours._name != again._name  # random: the values were not hashed
    assert ours.npartitions == theirs.npartitions == 3
    assert ours.dtypes.equals(theirs.dtypes)  # the group's strings become Arrow strings alike
    for mine, reference in zip(ours.partitions, theirs.partitions, strict=True):
        pd.testing.assert_frame_equal(mine.compute(), reference.compute())
