"""What ``print(moments)`` shows: one line that says what the statistics are of, not their arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd

from conftest import grouped_data
from fairpca_dist import compute_moments
from fairpca_dist.cells import HashCells


def test_group_moments_print_as_one_short_line():
    x, labels = grouped_data(n_rows=600, n_features=40, n_groups=3)
    moments = compute_moments(x, sensitive_feature=labels)
    assert repr(moments) == str(moments) == "GroupMoments(600 rows, 40 features, 3 groups ('g0': 244, 'g1': 208, 'g2': 148))"


def test_many_groups_are_listed_briefly():
    x, _ = grouped_data(n_rows=2_000, n_features=3)
    labels = np.arange(2_000) % 26
    moments = compute_moments(x, sensitive_feature=labels)
    assert repr(moments) == ("GroupMoments(2,000 rows, 3 features, 26 groups (0: 77, 1: 77, 2: 77, 3: 77, 4: 77, "
                             "5: 77 and 20 more))")


def test_cell_moments_print_as_one_short_line():
    x, labels = grouped_data(n_rows=600, n_features=30, n_groups=2)
    frame = pd.DataFrame(x, columns=[f"x{j}" for j in range(30)]).assign(group=labels, id=np.arange(600))
    cells = compute_moments(frame, sensitive_feature="group", key_columns=["id"], cells=HashCells(("id",), n_cells=10))
    text = repr(cells)
    assert "\n" not in text and len(text) < 200
    assert text == ("CellMoments(10 cells, 600 rows, 30 features, 2 groups ('g0', 'g1'), cells by hash of 'id', "
                    "seed 0)")
