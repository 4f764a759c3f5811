"""Example tables: the synthetic table's parameters are checked and named."""

from __future__ import annotations

import pytest

from fairpca_dist import InputError
from fairpca_dist.io.datasets import synthetic_group_table, write_synthetic_parquet


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
