"""``fairpca methods``: every registered method with its criterion, the groups it takes, whether it
reads the rows and its options with their defaults; one in full; ``fit --help-method``."""

from __future__ import annotations

import pytest
from conftest import grouped_data

from fairpca_dist import InputError, compute_moments, fit_projection
from fairpca_dist.assessment.scoring import criterion_named
from fairpca_dist.cli import main
from fairpca_dist.engine.datapasses import ArrayPasses
from fairpca_dist.solvers import SOLVERS, option_defaults

# Small budgets, so that each fit below takes a fraction of a second
_QUICK = {"dro": {"n_iter": 20, "n_restarts": 1}, "mmd": {"kernel": "linear"}}


def test_the_listing_names_every_method_its_criterion_groups_rows_and_options(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    blocks = {block.split(":")[0]: block for block in out.split("\n\n")[1:]}
    assert list(blocks) == list(SOLVERS)
    for method, spec in SOLVERS.items():
        block = " ".join(blocks[method].split())  # unwrapped
        criterion = criterion_named(spec.criterion_of(option_defaults(method)))
        assert f"criterion: {criterion.title} ({criterion.better} is " in block, block
        assert ("groups: 2 only" if spec.two_groups else "groups: 2 or more") in block
        assert ("reads rows: yes" if spec.reads_rows({}) else "reads rows: no") in block
        for name, default in option_defaults(method).items():
            assert f"{name}={default!r}" in block
    assert "fair-eig" in out and "groups: 2 only" in " ".join(blocks["olfat-sdp"].split())
    assert "tau=0.001" in blocks["mmd"] and "n_directions=10" in blocks["kleindessner-cov"]


def test_option_defaults_are_the_solvers_keyword_defaults():
    assert option_defaults("pca") == {}
    assert option_defaults("fair-eig") == {"tol": 1e-8, "max_iter": 100}
    assert list(option_defaults("dro"))[:2] == ["alpha", "lam"]
    for method, spec in SOLVERS.items():
        assert set(option_defaults(method)) == spec.options


@pytest.mark.parametrize("method", list(SOLVERS))
def test_two_groups_says_which_methods_refuse_three_groups(method):
    x, labels = grouped_data(n_rows=300, n_features=4, n_groups=3, seed=1)
    moments = compute_moments(x, sensitive_feature=labels)
    passes = ArrayPasses(x, labels, moments.groups) if SOLVERS[method].needs_rows else None

    def fit():
        return fit_projection(
            moments, 1, method=method, standardize=True, random_state=0, passes=passes, **_QUICK.get(method, {})
        )

    if SOLVERS[method].two_groups:
        with pytest.raises(InputError, match="two"):
            fit()
    else:
        assert fit().components.shape[0] == 4


def test_one_method_in_full(capsys):
    assert main(["methods", "dro"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dro: distributionally robust fair PCA")
    assert "criterion:  ABDiff (lower is fairer)" in out
    assert "the largest minus the smallest group reconstruction error" in out  # what the criterion means
    assert "groups:     2 or more" in out and "reads rows: no" in out
    assert "options (--option KEY=VALUE):" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and "=" in line.split()[0]}
    assert lines["alpha=0.15"].split(None, 1)[1].startswith("Radius scale")  # the first sentence of its description
    assert set(lines) == {f"{name}={default!r}" for name, default in option_defaults("dro").items()}


def test_fit_help_method_needs_no_table_and_unknown_methods_are_one_line(capsys):
    assert main(["methods", "mmd"]) == 0
    described = capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--method", "mmd", "--help-method"])  # no table or model folder: it only describes
    assert exit_info.value.code == 0 and capsys.readouterr().out == described
    assert "RBF MMD² (lower is fairer, with the default options)" in described
    with pytest.raises(SystemExit):
        main(["fit", "--help-method", "olfat-sdp"])
    assert capsys.readouterr().out.startswith("olfat-sdp: two-group FPCA")
    assert main(["methods", "fairest"]) == 2
    unknown = capsys.readouterr()
    assert unknown.out == "" and unknown.err.count("\n") == 1
    assert unknown.err.startswith("fairpca: error: unknown method 'fairest'; available: pca, ")


@pytest.mark.parametrize("method", ["dro", "samadi-sdp", "kleindessner-cov"])
def test_options_are_described_in_full_without_sphinx_markup(method, capsys):
    """Each option's first paragraph, whole (no "…" cutting a word), with Sphinx roles and
    literals as plain text, wrapped to 100 columns."""
    assert main(["methods", method]) == 0
    out = capsys.readouterr().out
    options = out[out.index("options (--option KEY=VALUE):") :]
    assert "…" not in options.replace("0 … 2.5", ""), options  # dro's lam: "paper grid 0 … 2.5" is the paper's
    assert not any(markup in out for markup in (":mod:", ":func:", ":data:", ":class:", "``", "`")), out
    assert all(len(line) <= 100 for line in out.splitlines())
    text = " ".join(options.split())
    if method == "dro":
        assert '"auto" (default): frontier for two groups, subgradient otherwise.' in text
        assert "(plus the objective's own rounding where a loss is near 0: frontier)." in text
    if method == "kleindessner-cov":
        assert "(dim R₊ = p − k + 1 where Σ is full rank on R)." in text


def test_sphinx_roles_read_as_plain_text():
    from fairpca_dist.cli import _plain

    assert _plain("see :func:`~a.b.c`, :data:`X`, ``x = 1`` and :class:`the model <a.FairProjection>`") == (
        "see c, X, x = 1 and the model"
    )
    assert _plain(":py:meth:`fairpca_dist.solvers.SolverSpec.criterion_of`") == (
        "fairpca_dist.solvers.SolverSpec.criterion_of"
    )
