"""Example tables: the synthetic table's parameters are checked and named."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from fairpca_dist import InputError
from fairpca_dist.io import datasets
from fairpca_dist.io.datasets import load_diabetes_table, synthetic_group_table, write_synthetic_parquet


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda folder: write_synthetic_parquet(folder, -5), r"n_rows must be an integer of at least 1, got -5"),
        (
            lambda folder: write_synthetic_parquet(folder, 10, rows_per_file=0),
            r"rows_per_file must be an integer of at least 1, got 0",
        ),
        (lambda folder: write_synthetic_parquet(folder, 2.5), r"n_rows must be an integer of at least 1, got 2\.5"),
        (lambda folder: synthetic_group_table(-1), r"n_rows must be an integer of at least 0, got -1"),
        (lambda folder: synthetic_group_table(10, n_groups=1), r"n_groups must be an integer of at least 2, got 1"),
        (lambda folder: synthetic_group_table(10, n_features=1), r"n_features must be an integer of at least 2, got 1"),
    ],
)
def test_a_bad_size_names_its_parameter_and_writes_nothing(tmp_path, call, message):
    with pytest.raises(InputError, match=message):
        call(tmp_path / "table")
    assert not (tmp_path / "table").exists()


def test_the_synthetic_table_has_the_rows_asked_for(tmp_path):
    assert len(synthetic_group_table(0)) == 0
    folder = write_synthetic_parquet(tmp_path / "table", 25, rows_per_file=10)
    assert sorted(p.name for p in folder.iterdir()) == [f"part-0000{i}.parquet" for i in range(3)]


def _sklearns_diabetes_table() -> pd.DataFrame:
    """The reference: scikit-learn's own loader, ``sex`` as integers."""
    from sklearn.datasets import load_diabetes

    frame = load_diabetes(as_frame=True, scaled=False).frame
    frame["sex"] = frame["sex"].astype(int)
    return frame


def test_the_diabetes_table_is_scikit_learns_read_without_importing_it():
    """The same frame as scikit-learn's loader gives (values, dtypes, columns, index), made in a
    process that has not imported scikit-learn and does not import it."""
    pd.testing.assert_frame_equal(load_diabetes_table(), _sklearns_diabetes_table(), check_exact=True)
    code = (
        "import sys\nfrom fairpca_dist.io.datasets import load_diabetes_table\n"
        "table = load_diabetes_table()\nprint(table.shape, 'sklearn' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(442,", "11)", "False"]


def test_the_diabetes_table_comes_from_scikit_learns_loader_where_its_files_are_elsewhere(monkeypatch):
    monkeypatch.setattr(datasets, "_diabetes_files", lambda: None)
    pd.testing.assert_frame_equal(load_diabetes_table(), _sklearns_diabetes_table(), check_exact=True)
