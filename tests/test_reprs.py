"""What ``print(moments)`` shows: one line that says what the statistics are of, not their arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import GroupError, compute_moments
from fairpca_dist.engine.cells import HashCells


def test_group_moments_print_as_one_short_line():
    x, labels = grouped_data(n_rows=600, n_features=40, n_groups=3)
    moments = compute_moments(x, sensitive_feature=labels)
    assert (
        repr(moments)
        == str(moments)
        == "GroupMoments(600 rows, 40 features, 3 groups ('g0': 244, 'g1': 208, 'g2': 148))"
    )


def test_many_groups_are_listed_briefly():
    x, _ = grouped_data(n_rows=2_000, n_features=3)
    labels = np.arange(2_000) % 26
    moments = compute_moments(x, sensitive_feature=labels)
    assert repr(moments) == (
        "GroupMoments(2,000 rows, 3 features, 26 groups (0: 77, 1: 77, 2: 77, 3: 77, 4: 77, 5: 77 and 20 more))"
    )


def test_cell_moments_print_as_one_short_line():
    x, labels = grouped_data(n_rows=600, n_features=30, n_groups=2)
    frame = pd.DataFrame(x, columns=[f"x{j}" for j in range(30)]).assign(group=labels, id=np.arange(600))
    cells = compute_moments(frame, sensitive_feature="group", key_columns=["id"], cells=HashCells(("id",), n_cells=10))
    text = repr(cells)
    assert "\n" not in text and len(text) < 200
    assert text == (
        "CellMoments(10 cells, 600 rows, 30 features, 2 groups ('g0', 'g1'), cells by hash of 'id', seed 0)"
    )


def test_intersectional_cell_moments_name_their_groups_a_and_b():
    x, _ = grouped_data(n_rows=400, n_features=3)
    frame = pd.DataFrame(x, columns=list("abc")).assign(
        race=np.repeat(["Black", "White"], 200), sex=np.tile(["f", "m"], 200), id=np.arange(400)
    )
    cells = compute_moments(
        frame, sensitive_feature=["race", "sex"], key_columns=["id"], cells=HashCells(("id",), n_cells=4)
    )
    assert "4 groups (Black & f, Black & m, White & f, White & m)" in repr(cells)


def intersectional_moments(rows_of_the_small_cell: int):
    """Groups race × marital status: three cells of 200 rows and ('Black', 'Married-AF-spouse')."""
    x, _ = grouped_data(n_rows=600 + rows_of_the_small_cell, n_features=3)
    cells = [("Black", "Divorced"), ("White", "Divorced"), ("White", "Married-AF-spouse")]
    race, marital = zip(
        *[cell for cell in cells for _ in range(200)],
        *[("Black", "Married-AF-spouse")] * rows_of_the_small_cell,
        strict=True,
    )
    return compute_moments(
        pd.DataFrame(x, columns=list("abc")).assign(race=race, marital=marital), sensitive_feature=["race", "marital"]
    )


def test_intersectional_groups_print_as_a_and_b():
    assert repr(intersectional_moments(5)) == (
        "GroupMoments(605 rows, 3 features, 4 groups (Black & Divorced: 200, Black & Married-AF-spouse: 5, "
        "White & Divorced: 200, White & Married-AF-spouse: 200))"
    )


def test_a_sparse_intersection_is_named_as_a_and_b_with_advice_about_intersections():
    with pytest.raises(GroupError) as raised:
        intersectional_moments(1).check_groups()
    message = str(raised.value)
    assert message.startswith(
        "1 group(s) with fewer than 2 rows: Black & Married-AF-spouse: 1 row(s); "
        "intersections of several sensitive columns"
    ), message
    assert "merge rare categories, or use fewer sensitive columns" in message
    assert "('" not in message and "binning" not in message and "age" not in message
