"""Bad input gets a clear error naming the problem, raised before or during the pass."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from conftest import grouped_data
from fairpca_dist import GroupError, InputError, SchemaError, compute_moments, fit_projection
from fairpca_dist.sources import open_table


@pytest.fixture()
def frame() -> pd.DataFrame:
    x, labels = grouped_data(n_rows=200, n_features=3, n_groups=2)
    return pd.DataFrame(x, columns=["income", "age", "debt"]).assign(sex=labels, name="someone")


@pytest.mark.parametrize("bad, kind", [(np.nan, "NaN"), (np.inf, "inf"), (-np.inf, "inf")])
def test_non_finite_feature_is_named(frame, bad, kind):
    frame.loc[57, "age"] = bad
    with pytest.raises(InputError, match=rf"'age': 1 \({kind}\)"):
        compute_moments(frame, sensitive_feature="sex", chunk_rows=50)


def test_missing_feature_value_in_nullable_column(frame):
    frame["age"] = frame["age"].round().astype("Int64")
    frame.loc[3, "age"] = pd.NA
    with pytest.raises(InputError, match="'age': 1 \\(NaN\\)"):
        compute_moments(frame, sensitive_feature="sex")


def test_misspelt_column_suggests_the_right_one(frame):
    with pytest.raises(SchemaError, match="feature column 'incme' not found; did you mean 'income'"):
        compute_moments(frame, sensitive_feature="sex", features=["incme", "age"])
    with pytest.raises(SchemaError, match="sensitive feature column 'sx' not found; did you mean 'sex'"):
        compute_moments(frame, sensitive_feature="sx")


def test_non_numeric_feature_is_named(frame):
    with pytest.raises(SchemaError, match="feature column 'name' has dtype .*expected a numeric dtype"):
        compute_moments(frame, sensitive_feature="sex", features=["income", "name"])


def test_text_columns_are_left_out_by_default(frame):
    assert open_table(frame, sensitive_feature="sex").features == ("income", "age", "debt")


def test_one_group_is_refused(frame):
    frame["sex"] = "f"
    with pytest.raises(GroupError, match="1 group.*'f'.*at least 2 groups"):
        compute_moments(frame, sensitive_feature="sex")


def test_tiny_group_is_refused(frame):
    frame.loc[10, "sex"] = "x"
    with pytest.raises(GroupError, match="fewer than 2 rows: 'x': 1 row"):
        compute_moments(frame, sensitive_feature="sex")


def test_missing_group_label_is_refused(frame):
    frame.loc[5, "sex"] = None
    with pytest.raises(GroupError, match="1 missing label"):
        compute_moments(frame, sensitive_feature="sex")


def test_labels_of_wrong_length(frame):
    with pytest.raises(SchemaError, match="sensitive_features has 10 values but the data has 200 rows"):
        compute_moments(frame[["income", "age"]].to_numpy(), sensitive_feature=np.zeros(10))


def test_negative_weight_is_refused(frame):
    frame["w"] = 1.0
    frame.loc[4, "w"] = -1.0
    with pytest.raises(InputError, match="sample_weight has 1 missing, infinite or negative"):
        compute_moments(frame, sensitive_feature="sex", sample_weight="w")


def test_empty_table_is_refused(frame):
    with pytest.raises(GroupError, match="no rows at all"):
        compute_moments(frame.iloc[:0], sensitive_feature="sex")


def test_bad_paths(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        compute_moments(str(tmp_path / "nope.parquet"), sensitive_feature="g")
    with pytest.raises(InputError, match="no files match"):
        compute_moments(str(tmp_path / "*.parquet"), sensitive_feature="g")
    (tmp_path / "t.xlsx").write_text("")
    with pytest.raises(InputError, match="cannot tell the format"):
        compute_moments(str(tmp_path / "t.xlsx"), sensitive_feature="g")


def test_array_labels_with_a_dask_frame_are_refused(frame):
    with pytest.raises(SchemaError, match="pass sensitive_feature and sample_weight as column names"):
        compute_moments(dd.from_pandas(frame, npartitions=2), sensitive_feature=frame["sex"].to_numpy())


def test_n_components_out_of_range(frame):
    moments = compute_moments(frame, sensitive_feature="sex")
    with pytest.raises(InputError, match="n_components=4 must be between 1 and n_features=3"):
        fit_projection(moments, 4)
    with pytest.raises(InputError, match="n_components=0"):
        fit_projection(moments, 0)


def test_zero_variance_column_with_standardize(frame):
    frame["debt"] = 5.0
    moments = compute_moments(frame, sensitive_feature="sex")
    with pytest.raises(SchemaError, match=r"\['debt'\] have zero variance"):
        fit_projection(moments, 2, standardize=True)
    fit_projection(moments, 2)  # without standardisation a constant column is harmless
