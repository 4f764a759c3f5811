"""Bad input gets a clear error naming the problem, raised before or during the pass."""

from __future__ import annotations

import gzip
import warnings

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import GroupError, InputError, ReadError, SchemaError, compute_moments, fit_projection
from fairpca_dist.engine.sources import open_table


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


def test_a_numeric_sensitive_feature_of_many_values_is_named_as_such(frame):
    # Bank Marketing's 'age' as the sensitive feature: 78 groups, some of one row.
    frame["age_years"] = np.r_[np.arange(50), np.repeat(50, len(frame) - 50)]
    with pytest.raises(
        GroupError,
        match=r"50 group\(s\) with fewer than 2 rows: 0: 1 row\(s\), .*, …; 51 groups in all: "
        r"a sensitive feature of many values \(a number such as an age\?\) needs binning",
    ):
        compute_moments(frame, sensitive_feature="age_years", features=["income", "debt"])


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
    with pytest.raises(SchemaError, match="sensitive_features is an in-memory array, which cannot be aligned"):
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


# ----------------------------------------------------------------------------- reading errors
# An error raised while reading rows names the file (or partition) and the column, on every
# reader path, and nothing is written.


def _with_text_in(frame: pd.DataFrame, row: int, column: str = "age") -> pd.DataFrame:
    bad = frame.astype({column: object})
    bad.loc[row, column] = "0.39x"
    return bad


@pytest.fixture()
def parquet_folder(frame, tmp_path):
    """Two Parquet files; the second types 'age' as strings (the first as numbers)."""
    folder = tmp_path / "table"
    folder.mkdir()
    frame.iloc[:100].to_parquet(folder / "part-0.parquet")
    _with_text_in(frame.iloc[100:], 150).astype({"age": str}).to_parquet(folder / "part-1.parquet")
    return folder


@pytest.mark.parametrize("pattern", ["{folder}", "{folder}/*.parquet"])
def test_text_in_a_numeric_column_of_one_parquet_file_names_file_and_column(parquet_folder, pattern):
    source = pattern.format(folder=parquet_folder)
    with pytest.raises(
        SchemaError,
        match=r"feature column 'age' in partition 1 \(file \S+part-1\.parquet\) "
        r"has 1 value\(s\) that are not numbers \(first: '0\.39x'\)",
    ):
        compute_moments(source, sensitive_feature="sex")


def test_parquet_file_with_a_text_feature_is_named_before_reading(frame, tmp_path):
    path = tmp_path / "one.parquet"
    frame.astype({"age": str}).to_parquet(path)
    with pytest.raises(SchemaError, match=r"feature column 'age' in '\S+one\.parquet' has dtype"):
        compute_moments(str(path), sensitive_feature="sex", features=["income", "age"])


def test_corrupt_parquet_file_names_the_file(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not a parquet file PAR1")
    with pytest.raises(
        ReadError,
        match=r"(?s)cannot read '\S+broken\.parquet' as Parquet.*Could not read schema from '\S+broken\.parquet'",
    ):
        compute_moments(str(path), sensitive_feature="sex")


def test_parquet_file_missing_a_column_names_the_file(frame, tmp_path):
    folder = tmp_path / "table"
    folder.mkdir()
    frame.iloc[:100].to_parquet(folder / "part-0.parquet")
    frame.iloc[100:].drop(columns="debt").to_parquet(folder / "part-1.parquet")
    with pytest.raises(ReadError, match=r"(?s)cannot read partition 1 \(file \S+part-1\.parquet\).*debt"):
        compute_moments(str(folder), sensitive_feature="sex", read_options={"split_row_groups": False})


@pytest.mark.parametrize("source", ["one", "glob"])
def test_text_in_a_csv_column_names_file_and_column(frame, tmp_path, source):
    # dask infers dtypes from the first 256 kB; the bad value comes far after that.
    big = pd.concat([frame] * 40, ignore_index=True)
    (tmp_path / "a.csv").write_text(big.to_csv(index=False))
    _with_text_in(big, len(big) - 3).to_csv(tmp_path / "b.csv", index=False)
    path = str(tmp_path / ("b.csv" if source == "one" else "*.csv"))
    partition = 0 if source == "one" else 1
    with pytest.raises(
        ReadError,
        match=rf"cannot read partition {partition} \(file \S+b\.csv\): column typed from "
        r"the file's first rows holds other values further down: 'age' \(read as "
        r"float64\) holds '0\.39x'\nTo read 'age' as found there: ",
    ):
        compute_moments(path, sensitive_feature="sex")


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_csv_numbers_typed_as_integers_by_dasks_sample_may_hold_decimals_further_down(frame, tmp_path, compression):
    # Bank Marketing's nr.employed is 5191 in the file's first rows and 5099.1 further down;
    # dask types columns from the first 256 kB. Features and weights are read as float64.
    big = pd.concat([frame] * 60, ignore_index=True).assign(age=lambda f: f["age"].round().astype(int), w=1)
    big = big.astype({"age": object, "w": object})
    big.loc[len(big) - 3, ["age", "w"]] = [40.5, 2.5]
    path = tmp_path / ("t.csv.gz" if compression else "t.csv")
    big.to_csv(path, index=False, compression=compression)
    assert dd.read_csv(path, blocksize=None).dtypes[["age", "w"]].tolist() == [np.int64, np.int64]  # the trap is set

    read = compute_moments(str(path), sensitive_feature="sex", sample_weight="w")
    held = compute_moments(big.astype({"age": float, "w": float}), sensitive_feature="sex", sample_weight="w")
    np.testing.assert_allclose(read.weight, held.weight, rtol=1e-15)
    np.testing.assert_allclose(read.scatter, held.scatter, rtol=1e-12)
    np.testing.assert_allclose(read.means_about(0.0), held.means_about(0.0), rtol=1e-12)


@pytest.mark.parametrize(
    "late, error, message",
    [
        (np.nan, InputError, r"non-finite feature values in partition 0 \(file \S+t\.csv\): 'age': 1 \(NaN\)"),
        ("0.39x", ReadError, r"cannot read partition 0 \(file \S+t\.csv\): ValueError: .*'0\.39x'"),
    ],
)
def test_csv_integer_feature_with_a_late_missing_or_text_value_names_it(frame, tmp_path, late, error, message):
    big = pd.concat([frame] * 60, ignore_index=True).assign(age=lambda f: f["age"].round().astype(int))
    big = big.astype({"age": object})
    big.loc[len(big) - 3, "age"] = late
    big.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(error, match=message):
        compute_moments(str(tmp_path / "t.csv"), sensitive_feature="sex")


def test_csv_without_header_has_columns_named_by_position_as_text(frame, tmp_path):
    # UCI's heart disease files: no header; the CLI passes column names as text ('1').
    frame[["income", "age", "debt", "sex"]].to_csv(tmp_path / "h.csv", index=False, header=False)
    read = compute_moments(str(tmp_path / "h.csv"), sensitive_feature="3", read_options={"header": None})
    assert read.feature_names == ("0", "1", "2")
    np.testing.assert_allclose(read.scatter, compute_moments(frame, sensitive_feature="sex").scatter, rtol=1e-12)


def test_a_missing_value_marker_in_a_csv_is_named_with_the_option_that_reads_it(frame, tmp_path):
    big = pd.concat([frame] * 60, ignore_index=True).astype({"age": object})
    big.loc[len(big) - 3, "age"] = "?"
    big.to_csv(tmp_path / "q.csv", index=False)
    with pytest.raises(
        ReadError,
        match=r"'age' \(read as float64\) holds '\?'\nIf '\?' marks a missing value: read_options="
        r"\{'na_values': \['\?'\]\} \(command line: --read-option 'na_values=\[\"\?\"\]'\)",
    ):
        compute_moments(str(tmp_path / "q.csv"), sensitive_feature="sex")
    read = compute_moments(
        str(tmp_path / "q.csv"), sensitive_feature="sex", read_options={"na_values": ["?"]}, features=["income", "debt"]
    )
    assert read.count.sum() == len(big)


def test_a_csv_named_otherwise_is_read_with_format_csv_and_a_long_separator_quietly(frame, tmp_path):
    # UCI's adult.data: a .data name and ", " between values (pandas' C parser takes one character).
    path = tmp_path / "adult.data"
    path.write_text(frame[["income", "age", "debt", "sex"]].to_csv(index=False).replace(",", ", "))
    with pytest.raises(
        InputError,
        match=r"cannot tell the format .*read_options=\{'format': 'csv'\} "
        r"\(command line: --read-option format=csv\)",
    ):
        compute_moments(str(path), sensitive_feature="sex")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' ParserWarning, once per partition, before
        read = compute_moments(str(path), sensitive_feature="sex", read_options={"format": "csv", "sep": ", "})
    np.testing.assert_allclose(read.scatter, compute_moments(frame, sensitive_feature="sex").scatter, rtol=1e-12)
    with pytest.raises(InputError, match=r"read option format='json' must be 'csv' or 'parquet'"):
        compute_moments(str(path), sensitive_feature="sex", read_options={"format": "json"})


def test_text_in_a_dask_dataframe_partition_names_partition_and_column(frame):
    parts = [frame.iloc[:100], _with_text_in(frame.iloc[100:], 170)]
    lying = dd.from_map(lambda i: parts[i], [0, 1], meta=frame.iloc[:0])  # meta says 'age' is float
    with pytest.raises(SchemaError, match=r"feature column 'age' in partition 1 has 1 value\(s\) that are not numbers"):
        compute_moments(lying, sensitive_feature="sex")


def test_io_errors_keep_their_type_and_name_the_partition(frame):
    def read(i):
        if i == 1:
            raise ConnectionError("storage went away")
        return frame.iloc[:100]

    flaky = dd.from_map(read, [0, 1], meta=frame.iloc[:0])
    with pytest.raises(ConnectionError, match="storage went away") as caught:
        compute_moments(flaky, sensitive_feature="sex")
    assert caught.value.__notes__ == ["while reading partition 1"]


def test_ingest_and_projection_name_the_bad_file_and_write_nothing(parquet_folder, frame, tmp_path):
    from fairpca_dist.io.ingest import ingest_table
    from fairpca_dist.projection import project_table

    with pytest.raises(SchemaError, match=r"'age' in partition 1 \(file \S+part-1\.parquet\)"):
        ingest_table(str(parquet_folder), tmp_path / "ingested", sensitive_feature="sex")
    model = fit_projection(compute_moments(frame, sensitive_feature="sex"), 2)
    with pytest.raises(SchemaError, match=r"'age' in partition 1 \(file \S+part-1\.parquet\)"):
        project_table(model, str(parquet_folder), tmp_path / "projected")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table"]


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_csv_rows_ending_with_a_delimiter_are_read_under_their_header(frame, tmp_path, compression):
    # 'a,b,sex' then '1,2,f,': pandas took the first column as the index and shifted every
    # column onto its neighbour's name; the error then blamed a healthy column.
    frame = frame[["income", "age", "debt", "sex"]]
    lines = frame.to_csv(index=False).splitlines()
    rows = [line + "," for line in lines[1:]]
    rows[5] = lines[6]  # a row without it reads as well
    text = "\n".join([lines[0], *rows]) + "\n"
    suffix, options = (".csv.gz", {}) if compression else (".csv", {"blocksize": 4000})
    for name in ("a", "b"):
        (tmp_path / f"{name}{suffix}").write_bytes(gzip.compress(text.encode()) if compression else text.encode())
    read = compute_moments(str(tmp_path / f"*{suffix}"), sensitive_feature="sex", read_options=options)
    assert read.feature_names == ("income", "age", "debt")
    held = compute_moments(pd.concat([frame, frame]), sensitive_feature="sex")
    np.testing.assert_allclose(read.scatter, held.scatter, rtol=1e-12)


def test_csv_rows_ending_with_a_delimiter_and_one_with_a_value_there_names_the_file(frame, tmp_path):
    lines = frame[["income", "age", "debt", "sex"]].to_csv(index=False).splitlines()
    rows = [line + "," for line in lines[1:]]
    rows[150] += "7"
    (tmp_path / "t.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    with pytest.raises(
        ReadError,
        match=r"cannot read partition \d \(file \S+t\.csv\): .*the rows end with a "
        r"delimiter \(an empty field after 'sex', the header's last column\), but "
        r"1 row\(s\) hold a value there \(first: '7'\)",
    ):
        compute_moments(str(tmp_path / "t.csv"), sensitive_feature="sex", read_options={"blocksize": 5000})
