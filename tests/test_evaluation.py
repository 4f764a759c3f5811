"""evaluate / plan_splits: the split plan, input errors raised before any fit, and the dask
path (Parquet on disk) giving the same Evaluation as the in-memory frame.

The row-level numerical reference of the protocol is in test_evaluation_reference.py.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from fairpca_dist.assessment.evaluation import evaluate, plan_splits
from fairpca_dist.engine.cells import CellMoments, HashCells
from fairpca_dist.engine.passes import compute_moments
from fairpca_dist.exceptions import ConvergenceWarning, GroupError, InputError
from fairpca_dist.solvers.result import make_projection

FEATURES = ["f0", "f1", "f2", "f3"]
CELL_LABELS = tuple(f"c{c}" for c in range(10))


def make_frame(n_rows: int = 2000, *, seed: int = 0, rare_cells: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Two groups differing in mean and spread, a ``cell`` column c0 … c9 and an ``id``.

    With ``rare_cells``, group "rare" lives only in those cells (half of their rows), every
    other row is "common"."""
    rng = np.random.default_rng(seed)
    cell = np.array(CELL_LABELS)[rng.integers(10, size=n_rows)]
    if rare_cells is None:
        s = rng.choice(["common", "rare"], size=n_rows, p=[0.6, 0.4])
    else:
        s = np.where(np.isin(cell, rare_cells) & (rng.random(n_rows) < 0.5), "rare", "common")
    x = rng.normal(size=(n_rows, len(FEATURES))) @ rng.normal(size=(len(FEATURES),) * 2)
    x[s == "rare"] = 1.7 * x[s == "rare"] + 3.0
    frame = pd.DataFrame(x * [1.0, 5.0, 0.2, 40.0] + 10.0, columns=FEATURES)
    frame["s"] = s
    frame["cell"] = cell
    frame["id"] = np.arange(n_rows) * 3 + 1
    return frame


def by_column(frame: pd.DataFrame) -> CellMoments:
    return compute_moments(frame, sensitive_feature="s", features=FEATURES, cells="cell")


def recording_solver(moments, n_components, *, random_state=None, center="group", tilt=0.0):
    """A user solver that records its calls (to prove errors come before any fit)."""
    recording_solver.calls.append(random_state)
    second = moments.scatter_about(center) / moments.weight[:, None, None]
    weights = np.array([1.0 - tilt, 1.0 + tilt])
    values, vectors = np.linalg.eigh(np.tensordot(weights / weights.sum(), second, axes=1))
    return make_projection(
        moments,
        vectors[:, np.argsort(values)[::-1][:n_components]],
        method="recording_solver",
        n_components=n_components,
        center=center,
        objective_history=[0.0],
        n_iter=1,
        status="closed_form",
    )


recording_solver.calls = []


@pytest.fixture(autouse=True)
def _reset_calls():
    recording_solver.calls = []
    yield


# ----------------------------------------------------------------------------- plan_splits
@pytest.mark.parametrize(
    ("n_cells", "train_fraction", "n_folds", "n_splits"),
    [(10, 0.3, 3, 10), (20, 0.3, 3, 10), (10, 0.5, 2, 5), (20, 0.7, 5, 8), (4, 0.5, 2, 6)],
)
def test_plan_splits_partitions_cells(n_cells, train_fraction, n_folds, n_splits):
    """train ∪ test = all cells, disjoint; folds partition train with sizes within one; the
    splits are distinct; train has round(train_fraction × n_cells) cells; reproducible."""
    cells = [f"k{i:02d}" for i in range(n_cells)]
    splits = plan_splits(
        cells, n_splits=n_splits, train_fraction=train_fraction, n_folds=n_folds, random_state=np.random.default_rng(3)
    )
    assert len(splits) == n_splits
    seen = set()
    for index, split in enumerate(splits):
        assert split.index == index
        train, test = set(split.train), set(split.test)
        assert len(train) == len(split.train) == round(train_fraction * n_cells)
        assert len(test) == len(split.test)
        assert train | test == set(cells) and not train & test
        assert len(split.folds) == n_folds
        assert set(itertools.chain(*split.folds)) == train and sum(map(len, split.folds)) == len(train)
        sizes = [len(fold) for fold in split.folds]
        assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
        seen.add(frozenset(train))
    assert len(seen) == n_splits
    again = plan_splits(
        cells, n_splits=n_splits, train_fraction=train_fraction, n_folds=n_folds, random_state=np.random.default_rng(3)
    )
    assert again == splits
    other = plan_splits(
        cells, n_splits=n_splits, train_fraction=train_fraction, n_folds=n_folds, random_state=np.random.default_rng(4)
    )
    assert other != splits


def test_plan_splits_refuses_more_splits_than_exist():
    with pytest.raises(InputError):
        plan_splits(["a", "b", "c", "d"], n_splits=math.comb(4, 2) + 1, train_fraction=0.5, n_folds=2, random_state=0)


# ----------------------------------------------------------------------------- errors
def test_group_missing_from_test_cells_is_named_before_any_fit():
    """Group "rare" lives in 2 of the 10 cells, both in split 0's training part: the test part
    has no "rare" row. The error names the split, the test cells and the group, and comes
    before any fit."""
    seed = 11
    (plan,) = plan_splits(
        CELL_LABELS, n_splits=1, train_fraction=0.3, n_folds=3, random_state=np.random.default_rng(seed)
    )
    frame = make_frame(rare_cells=plan.train[:2])
    cells = by_column(frame)
    assert int((cells.count[:, cells.groups.index("rare")] > 0).sum()) == 2
    with pytest.raises(GroupError) as raised:
        evaluate(cells, 2, {recording_solver: None, "pca": None}, n_splits=1, random_state=seed)
    message = str(raised.value)
    assert "split 0" in message and "'rare'" in message
    assert "test" in message
    assert all(repr(c) in message for c in plan.test), message
    assert recording_solver.calls == []


def test_group_missing_from_a_fold_is_named_before_any_fit():
    """Same table, methods with a grid: the fold of split 0's third training cell holds no
    "rare" row (its validation set), so cross-validation is impossible."""
    seed = 11
    (plan,) = plan_splits(
        CELL_LABELS, n_splits=1, train_fraction=0.3, n_folds=3, random_state=np.random.default_rng(seed)
    )
    frame = make_frame(rare_cells=plan.train[:2])
    cells = by_column(frame)
    (empty_fold,) = [fold for fold in plan.folds if not set(fold) & set(plan.train[:2])]
    with pytest.raises(GroupError) as raised:
        evaluate(
            cells,
            2,
            {recording_solver: {"tilt": [0.0, 0.5]}, "dro": {"lam": [0.0, 1.0], "alpha": 0.1}},
            n_splits=1,
            random_state=seed,
        )
    message = str(raised.value)
    assert "split 0" in message and "'rare'" in message
    assert repr(sorted(empty_fold)) in message or all(repr(c) in message for c in empty_fold), message
    assert recording_solver.calls == []


def test_group_in_two_of_ten_cells_fails_with_cross_validation():
    """With 3 training cells in 3 folds, a group living in 2 cells always misses some fold."""
    cells = by_column(make_frame(rare_cells=("c3", "c8")))
    with pytest.raises(GroupError, match="rare"):
        evaluate(cells, 2, {recording_solver: {"tilt": [0.0, 0.5]}}, n_splits=3, random_state=0)
    assert recording_solver.calls == []


@pytest.fixture(scope="module")
def good_cells() -> CellMoments:
    return by_column(make_frame(seed=1))


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"train_fraction": 0.25}, ["train_fraction", "0.25"]),
        ({"n_folds": 4}, ["n_folds"]),
        ({"methods": [recording_solver, "no-such-method"]}, ["no-such-method"]),
        ({"methods": {recording_solver: {"tilt": [0.0, 0.5]}, "dro": {"bogus": 1}}}, ["bogus", "dro"]),
        (
            {"methods": {recording_solver: {"tilt": [0.0, 0.5]}, "dro": {"alpha": [0.1, 0.2], "bogus": [1, 2]}}},
            ["bogus"],
        ),
        ({"methods": [recording_solver, "mm-robust"]}, ["mm-robust"]),
        ({"n_components": 5}, ["n_components"]),
        ({"n_components": 0}, ["n_components"]),
        ({"center": "median"}, ["center"]),
    ],
    ids=[
        "fraction-not-whole-cells",
        "more-folds-than-cells",
        "unknown-method",
        "unknown-option",
        "unknown-swept-option",
        "needs-rows",
        "too-many-components",
        "zero-components",
        "bad-center",
    ],
)
def test_bad_settings_raise_input_error_before_any_fit(good_cells, kwargs, words):
    kwargs = dict(kwargs)
    methods = kwargs.pop("methods", {recording_solver: {"tilt": [0.0, 0.5]}})
    n_components = kwargs.pop("n_components", 2)
    with pytest.raises(InputError) as raised:
        evaluate(good_cells, n_components, methods, n_splits=2, random_state=0, **kwargs)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    assert recording_solver.calls == []


@pytest.mark.parametrize("what", ["group-moments", "frame"])
def test_evaluate_needs_cell_moments(good_cells, what):
    data = good_cells.total() if what == "group-moments" else make_frame()
    with pytest.raises(InputError, match="CellMoments"):
        evaluate(data, 2, "pca", n_splits=2, random_state=0)


def test_unknown_option_of_a_user_solver_is_rejected_before_any_fit(good_cells):
    def strict_solver(moments, n_components, *, random_state=None, center="group"):
        raise AssertionError("must not be called")

    with pytest.raises(InputError, match="bogus"):
        evaluate(
            good_cells,
            2,
            {recording_solver: {"tilt": [0.0, 0.5]}, strict_solver: {"bogus": 1}},
            n_splits=2,
            random_state=0,
        )
    assert recording_solver.calls == []


# ----------------------------------------------------------------------------- the dask path
def numbers(evaluation) -> dict:
    """Every number of an Evaluation (timings left out)."""
    out = evaluation.to_dict()
    out.pop("seconds")
    for result in out["results"]:
        result.pop("seconds")
    return out


def assert_same(a, b, path="", *, rel: float) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}", rel=rel)
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]", rel=rel)
    elif isinstance(a, float) and not isinstance(b, bool):
        assert b == pytest.approx(a, rel=rel, abs=1e-13), path
    else:
        assert a == b, path


def test_parquet_through_dask_gives_the_in_memory_evaluation(tmp_path):
    """compute_moments on a Parquet folder of several partition files (read with dask, in
    chunks) and on the in-memory frame give the same cell statistics and the same Evaluation.

    The statistics differ only in summation order (~1e-16 relative), so closed-form methods
    (pca, a user solver with a grid) agree to 1e-10. DRO is compared at 1e-6: its 200-step
    subgradient run keeps the best iterate, a choice that round-off can move (measured 8e-10
    relative here at λ = 0; see test_evaluation_reference.py for the sensitivity study)."""
    frame = make_frame(n_rows=3000, seed=4)
    folder = tmp_path / "table"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.random.default_rng(0).permutation(len(frame)), 4)):
        frame.iloc[np.sort(part)].to_parquet(folder / f"part-{i}.parquet", index=False)
    spec = HashCells(("id",), n_cells=10, seed=2)
    in_memory = compute_moments(frame, sensitive_feature="s", features=FEATURES, cells=spec)
    on_disk = compute_moments(str(folder), sensitive_feature="s", features=FEATURES, cells=spec, chunk_rows=400)
    assert on_disk.cells == in_memory.cells and on_disk.groups == in_memory.groups
    np.testing.assert_array_equal(on_disk.count, in_memory.count)
    for cell in in_memory.cells:
        np.testing.assert_allclose(on_disk[cell].mean, in_memory[cell].mean, rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(
            on_disk[cell].scatter,
            in_memory[cell].scatter,
            rtol=1e-12,
            atol=1e-12 * np.abs(in_memory[cell].scatter).max(),
        )
    settings = dict(n_splits=3, center="global", standardize=True, random_state=8)
    for methods, rel in [
        ({"pca": None, recording_solver: {"tilt": [-0.5, 0.0, 0.5]}}, 1e-10),
        ({"dro": {"alpha": [0.05, 0.15], "lam": [0.0, 1.0]}}, 1e-6),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            expected = evaluate(in_memory, 2, methods, **settings)
            got = evaluate(on_disk, 2, methods, **settings)
        assert got.splits == expected.splits
        assert [r.params for r in got.results] == [r.params for r in expected.results]
        assert_same(numbers(got), numbers(expected), rel=rel)
