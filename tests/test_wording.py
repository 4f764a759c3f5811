"""Lists in messages stay short and say what differs (fairpca_dist.wording)."""

from __future__ import annotations

from fairpca_dist.wording import differences, listed, listed_counts


def test_listed_shows_a_few_and_counts_the_rest():
    assert listed([]) == "none"
    assert listed(["a", "b"]) == "'a', 'b'"
    assert listed([f"c{i}" for i in range(500)]) == "'c0', 'c1', 'c2', 'c3', 'c4', 'c5' and 494 more"
    assert listed(range(3), 2, show=str) == "0, 1 and 1 more"


def test_listed_counts_puts_the_largest_first():
    assert listed_counts({"a": 1, "b": 12, "c": 3}, 2) == "b: 12, c: 3 and 1 more"


def test_differences_names_only_what_differs():
    features = [f"x{i}" for i in range(500)]
    text = differences("the model", features, "the moments", [*features[:-1], "extra"])
    assert text == "only in the model: 'x499'; only in the moments: 'extra'"
    assert differences("the model", ["a", "b", "c"], "the moments", ["a", "c", "b"]) == (
        "the same 3 in another order: 'c' where the model has 'b' (position 1)"
    )
    assert len(differences("a", [f"y{i}" for i in range(500)], "b", [])) < 80
