"""engine/blas.py: the in-place syrk against numpy, on every block layout the kernel hands it."""

from __future__ import annotations

import numpy as np
import pytest

from fairpca_dist import InputError
from fairpca_dist.engine.blas import add_gram, symmetrized


@pytest.mark.parametrize(
    "take",
    [
        pytest.param(lambda x: x, id="whole array"),
        pytest.param(lambda x: x[3:17], id="row slice"),
        pytest.param(lambda x: x[5:6], id="one row"),
        pytest.param(lambda x: x[::2], id="every other row"),
        pytest.param(lambda x: np.ones((30, 2 * x.shape[1]))[:9, : x.shape[1]], id="head of a wider buffer"),
    ],
)
@pytest.mark.parametrize("p", [1, 6, 33])
def test_add_gram_adds_the_lower_triangle_of_the_gram_matrix(take, p):
    rng = np.random.default_rng(p)
    block = take(rng.normal(size=(40, p)))
    gram = np.tril(rng.normal(size=(p, p)))
    start = gram.copy()
    marker = np.triu(np.full((p, p), 7.0), 1)
    gram += marker  # the strict upper triangle must stay as it is
    add_gram(block, gram)
    np.testing.assert_allclose(np.tril(gram), np.tril(start + block.T @ block), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(np.triu(gram, 1), marker)
    np.testing.assert_allclose(symmetrized(gram), symmetrized(start) + block.T @ block, rtol=1e-13, atol=1e-13)


def test_add_gram_of_no_rows_changes_nothing():
    gram = np.eye(3)
    add_gram(np.zeros((0, 3)), gram)
    np.testing.assert_array_equal(gram, np.eye(3))


@pytest.mark.parametrize(
    ("block", "gram"),
    [
        pytest.param(np.ones((4, 3), dtype=np.float32), np.zeros((3, 3)), id="float32 rows"),
        pytest.param(np.asfortranarray(np.ones((4, 3))), np.zeros((3, 3)), id="column-major rows"),
        pytest.param(np.ones((4, 3)), np.zeros((2, 2)), id="accumulator of another size"),
        pytest.param(np.ones((4, 3)), np.asfortranarray(np.arange(9.0).reshape(3, 3)), id="column-major accumulator"),
        pytest.param(np.ones((4, 3)), np.zeros((3, 3)).view(np.int64), id="integer accumulator"),
    ],
)
def test_add_gram_refuses_layouts_blas_would_misread(block, gram):
    with pytest.raises(InputError, match="add_gram"):
        add_gram(block, gram)
