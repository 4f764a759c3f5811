"""Nothing dropped in silence (issue 31): every column ingest leaves out of the features is named
with its reason, in the summary and in schema.json, and a column of numbers whose missing values
are written '?' (UCI's communities-and-crime) is told from text, with the option that reads it."""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pandas as pd
import pytest

from fairpca_dist import InputError, ReadError, SchemaError
from fairpca_dist.cli import main
from fairpca_dist.io.ingest import ingest_table
from fairpca_dist.io.markers import TextProfile, profile_text, with_markers

ROWS = 300
QUESTION_EARLY = [f"policeA{j}" for j in range(12)]  # a '?' in row 0: dask's sample types them as text
QUESTION_LATE = [f"policeB{j}" for j in range(12)]  # '?' from row 20 on: dask's 10-row default read them as numbers
REMEDY = (
    "If '?' marks a missing value: read_options={'na_values': ['?']} "
    """(command line: --read-option 'na_values=["?"]')"""
)


@pytest.fixture()
def crime_csv(tmp_path):
    """A 128-column CSV like communities-and-crime: 98 numeric features, 24 numeric columns with
    '?' for a missing value, 2 text columns, a fold number to exclude, a column empty in every
    row, one with '?' in every row, and the group column."""
    rng = np.random.default_rng(0)
    columns = {
        "state": rng.choice(["NY", "CA", "TX"], ROWS),
        "communityname": [f"town {i}" for i in range(ROWS)],
        "fold": rng.integers(1, 11, ROWS),
        "race": rng.choice(["a", "b"], ROWS),
    }
    columns.update({f"pop{j}": np.round(rng.normal(size=ROWS), 3) for j in range(98)})
    columns.update({"empty": np.full(ROWS, np.nan), "unrecorded": np.full(ROWS, "?")})
    for name in [*QUESTION_EARLY, *QUESTION_LATE]:
        values = np.round(rng.random(ROWS), 2).astype(object)
        missing = rng.random(ROWS) < 0.02
        missing[:20] = name in QUESTION_EARLY and np.arange(20) == 0
        missing[20 + rng.integers(ROWS - 20)] = True
        values[missing] = "?"
        columns[name] = values
    frame = pd.DataFrame(columns)
    assert frame.shape[1] == 128
    frame.to_csv(tmp_path / "crime.csv", index=False)
    return tmp_path / "crime.csv", frame


def test_columns_left_out_are_named_with_their_reason_and_the_na_values_remedy(crime_csv, tmp_path, capsys):
    path, _ = crime_csv
    assert main(["ingest", str(path), str(tmp_path / "t"), "--sensitive-feature", "race", "--exclude", "fold"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ingested 300 rows (0 rejected), 98 features (pop0, pop1") and out[0].endswith("/t")
    assert out[1].startswith(
        "29 columns left out of the features: 'policeA0', 'policeA1', 'policeA2' and 21 more (numbers but for '?'); "
    )
    for shown in [
        "'state', 'communityname' (not numeric)",
        "'fold' (excluded by the user)",
        "'unrecorded' (all missing: only '?')",
        "'empty' (all missing)",
    ]:
        assert shown in out[1]
    assert out[2] == REMEDY and len(out) == 3
    schema = json.loads((tmp_path / "t" / "schema.json").read_text())
    assert schema["dropped_columns"] == {
        "state": "not numeric",
        "communityname": "not numeric",
        "fold": "excluded by the user",
        "empty": "all missing",
        "unrecorded": "all missing: only '?'",
        **{name: "numbers but for '?'" for name in [*QUESTION_EARLY, *QUESTION_LATE]},
    }
    assert schema["suggested_read_options"] == {"na_values": ["?"]}
    assert schema["features"] == [f"pop{j}" for j in range(98)]


def test_with_na_values_the_question_mark_columns_become_features(crime_csv, tmp_path):
    path, frame = crime_csv
    result = ingest_table(
        str(path),
        tmp_path / "t",
        sensitive_feature="race",
        exclude=["fold"],
        read_options={"na_values": ["?"], "blocksize": 40_000},
        on_bad_rows="drop",
    )
    marked = [*QUESTION_EARLY, *QUESTION_LATE]
    assert result.schema["features"] == [*(f"pop{j}" for j in range(98)), *marked]
    assert result.schema["dropped_columns"] == {
        "state": "not numeric",
        "communityname": "not numeric",
        "fold": "excluded by the user",
        "empty": "all missing",
        "unrecorded": "all missing",
    }
    assert result.schema["suggested_read_options"] == {}
    assert len(result.schema["partitions"]) > 1
    with_question = (frame[marked] == "?").any(axis=1)
    assert result.rejected == with_question.sum() > 0 and result.rows == ROWS - with_question.sum()
    assert result.summary().splitlines()[1] == (
        "5 columns left out of the features: 'state', 'communityname' "
        "(not numeric); 'empty', 'unrecorded' (all missing); "
        "'fold' (excluded by the user)"
    )
    back = pd.read_parquet(tmp_path / "t" / "parts")
    assert "empty" not in back.columns and back[marked].notna().all().all()


def test_the_rejected_rows_message_stays_short_on_a_wide_table(crime_csv, tmp_path):
    path, frame = crime_csv
    with pytest.raises(InputError) as error:
        ingest_table(
            str(path),
            tmp_path / "t",
            sensitive_feature="race",
            key_columns=["communityname"],
            read_options={"na_values": ["?"]},
        )
    message = str(error.value)
    rejected = (frame[[*QUESTION_EARLY, *QUESTION_LATE]] == "?").any(axis=1)
    first = frame.loc[rejected.idxmax()]
    assert message.startswith(f"{rejected.sum()} row(s) have bad values (per column: ")
    assert "and 18 more); a sample is in " in message
    assert f"the first: communityname={first['communityname']!r}, " in message
    assert len(message) < 700 and max(map(len, message.splitlines())) < 400, message
    assert not (tmp_path / "t").exists()


def test_a_listed_feature_read_as_text_says_what_it_holds(crime_csv, tmp_path):
    path, _ = crime_csv
    with pytest.raises(
        SchemaError,
        match=r"feature column 'policeA0' in '\S+crime\.csv' has dtype str\w*, expected a "
        r"numeric dtype; in its first partition: numbers but for '\?'\n" + re.escape(REMEDY),
    ):
        ingest_table(str(path), tmp_path / "t", sensitive_feature="race", features=["pop0", "policeA0"])
    with pytest.raises(SchemaError, match=r"'state' .* expected a numeric dtype; in its first partition: not numeric$"):
        ingest_table(str(path), tmp_path / "t", sensitive_feature="race", features=["pop0", "state"])


def test_listed_features_name_every_other_column_as_not_listed(crime_csv, tmp_path):
    path, _ = crime_csv
    result = ingest_table(
        str(path), tmp_path / "t", sensitive_feature="race", features=["pop0", "pop1"], pass_through=["communityname"]
    )
    assert set(result.schema["dropped_columns"].values()) == {"not among the listed features"}
    assert len(result.schema["dropped_columns"]) == 128 - 4
    assert result.summary().splitlines()[1] == (
        "124 columns left out of the features: 'state', 'fold', 'pop2' and 121 more (not among the listed features)"
    )


def test_markers_in_a_dataframe_whatever_its_dtypes(tmp_path):
    frame = pd.DataFrame(
        {
            "sex": ["f", "m"] * 6,
            "x": np.arange(12.0),
            "dash": [0.5, "-", 1.5, 2.0, ".", 3.0, 4.0, "-", 5.0, 6.0, 7.0, 8.0],
            "na_word": pd.array(["1", "2", "NA", "3", "4", "5", "6", "7", "8", "9", "10", "n/a"], dtype="string"),
            "answer": ["yes", "no", "0", "1"] * 3,
            "as_text": [str(v) for v in range(12)],
            "date": pd.date_range("2024-01-01", periods=12),
            "gone": [None] * 12,
        }
    )
    result = ingest_table(frame, tmp_path / "t", sensitive_feature="sex")
    assert result.schema["features"] == ["x"]
    assert result.schema["dropped_columns"] == {
        "dash": "numbers but for '-', '.'",
        "na_word": "numbers but for 'NA', 'n/a'",
        "answer": "not numeric",
        "as_text": "numbers stored as text",
        "date": "not numeric (datetime64[us])",
        "gone": "all missing",
    }
    assert result.schema["suggested_read_options"] == {"na_values": ["-", ".", "NA", "n/a"]}


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        (["0", "1", "?", "1", "0"], "numbers but for '?'"),  # a binary column with a marker
        (["A", "B", "C", "5", "6"], "not numeric"),  # grades: more distinct texts than numbers
        (["yes", "no", "0", "1"], "not numeric"),
        (["5", "5", "missing", "5"], "numbers but for 'missing'"),  # a word for missing counts as a marker
        (["?", "?", None], "all missing: only '?'"),
        ([None, None], "all missing"),
        (["US", "US"], "not numeric"),
        ([f"id{i}" for i in range(10)] + ["1", "2"], "not numeric"),  # many distinct texts
    ],
)
def test_text_profile_reasons(values, reason):
    assert profile_text(pd.Series(values, dtype=object)).reason() == reason


def test_text_profiles_of_partitions_add_up():
    parts = [pd.Series(["1", "?", "2"]), pd.Series(["3", "-", "4"]), pd.Series(["5", ".", "NA", "6"])]
    profiles = [profile_text(part) for part in parts]
    two = profiles[0] + profiles[1]
    assert two.texts == {"?": 1, "-": 1} and two.numbers == 4 and two.markers == ("?", "-")
    every = sum(profiles, TextProfile())
    assert every.texts is None and every.markers == () and every.reason() == "not numeric"  # 4 distinct: text


def test_a_partition_is_profiled_whole_unless_its_head_is_already_text():
    numbers = pd.Series(np.arange(5000.0).astype(str), dtype=object)
    late_marker = numbers.copy()
    late_marker[4000:4010] = "?"
    assert profile_text(late_marker) == TextProfile(numbers=4990, distinct_numbers=4990, texts={"?": 10})
    names = pd.Series([f"person {i}" for i in range(5000)], dtype=object)
    assert profile_text(names).texts is None and profile_text(names).reason() == "not numeric"


def _marked_csv(path, rows=300, late=None):
    """A CSV with group 'g', numbers 'a', 'b' with '?' in two rows and 'c' with '-' in two rows
    (with ``late``: 'b' and 'c' hold '?' only in row ``late``, past the rows dask types from)."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"g": rng.choice(["x", "y"], rows), **{c: rng.normal(size=rows).round(3) for c in "abc"}})
    frame = frame.astype({"b": object, "c": object})
    if late is None:
        frame.loc[[0, 50], "b"] = "?"
        frame.loc[[0, 70], "c"] = "-"
    else:
        frame.loc[late, ["b", "c"]] = "?"
    frame.to_csv(path, index=False)
    return path


def test_the_suggested_na_values_keep_those_given_and_work_when_copied(tmp_path, capsys):
    path = str(_marked_csv(tmp_path / "marks.csv"))
    given = ["ingest", path, str(tmp_path / "t"), "--sensitive-feature", "g", "--on-bad-rows", "drop"]
    assert main([*given, "--read-option", 'na_values=["?"]']) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "1 column left out of the features: 'c' (numbers but for '-')"
    assert out[2] == (
        "If '?', '-' mark missing values: read_options={'na_values': ['?', '-']} "
        """(command line: --read-option 'na_values=["?", "-"]')"""
    )
    assert json.loads((tmp_path / "t" / "schema.json").read_text())["suggested_read_options"] == {
        "na_values": ["?", "-"]
    }
    copied = shlex.split(out[2].split("(command line: ", 1)[1].removesuffix(")"))
    assert main([*given[:2], str(tmp_path / "t2"), *given[3:], *copied]) == 0
    schema = json.loads((tmp_path / "t2" / "schema.json").read_text())
    assert schema["features"] == ["a", "b", "c"] and schema["rejected"] == 3 and schema["dropped_columns"] == {}


@pytest.mark.parametrize(
    ("given", "suggested"),
    [
        (None, ["-"]),
        ("?", ["?", "-"]),
        (["?", "-"], ["?", "-"]),
        ({"b": ["?"]}, {"b": ["?"], "c": ["-"]}),
        ({"c": "n/a"}, {"c": ["n/a", "-"]}),
    ],
)
def test_with_markers_adds_the_markers_found_to_those_given(given, suggested):
    assert with_markers(given, {"c": ["-"]}) == suggested


def test_a_marker_past_the_typed_rows_fails_in_one_line_naming_the_columns_and_the_remedy(tmp_path):
    path = str(_marked_csv(tmp_path / "late.csv", rows=3000, late=2500))
    with pytest.raises(ReadError) as error:
        ingest_table(path, tmp_path / "t", sensitive_feature="g", read_options={"na_values": ["-"]})
    first, remedy = str(error.value).splitlines()
    assert first.endswith(
        "late.csv): columns typed from the file's first rows hold other values further down: "
        "'b' (read as float64) holds '?', 'c' (read as float64) holds '?'"
    )
    assert (
        remedy
        == """If '-', '?' mark missing values: read_options={'na_values': ['-', '?']} (command line: \
--read-option 'na_values=["-", "?"]')"""
    )
    result = ingest_table(
        path, tmp_path / "t", sensitive_feature="g", read_options={"na_values": ["-", "?"]}, on_bad_rows="drop"
    )
    assert result.schema["features"] == ["a", "b", "c"] and result.rejected == 1


@pytest.fixture()
def mostly_marked(tmp_path):
    """Like UCI's processed.hungarian.data: no header, group column 1, column 3 with a few '?',
    columns 5 and 6 '?' in most rows (6 in all but one)."""
    rng = np.random.default_rng(2)
    rows = 60
    frame = pd.DataFrame({i: rng.normal(size=rows).round(2).astype(object) for i in range(7)})
    frame[1] = rng.choice([0, 1], rows)
    frame.loc[[4, 9], 3] = "?"
    frame.loc[frame.index % 3 != 0, 5] = "?"
    frame.loc[1:, 6] = "?"
    frame.to_csv(tmp_path / "h.data", index=False, header=False)
    return [
        "ingest",
        str(tmp_path / "h.data"),
        str(tmp_path / "t"),
        "--sensitive-feature",
        "1",
        "--read-option",
        "header=None",
        "--read-option",
        "format=csv",
    ]


def test_columns_mostly_of_markers_are_offered_to_be_left_out(mostly_marked, tmp_path, capsys):
    assert main(mostly_marked) == 0
    out = capsys.readouterr().out.splitlines()
    assert "'5' (numbers but for '?' in 67% of its values); '6' (numbers but for '?' in 98% of its values)" in out[1]
    assert (
        out[2]
        == """If '?' marks a missing value: read_options={'na_values': ['?']} (command line: \
--read-option 'na_values=["?"]')"""
    )
    assert out[3] == (
        "Columns '5', '6' are mostly missing-value markers: read as missing, they would reject most "
        "rows; leave them out (exclude=['5', '6']; command line: --exclude 5 6)"
    )
    assert json.loads((tmp_path / "t" / "schema.json").read_text())["suggested_exclude"] == ["5", "6"]
    assert (
        main([*mostly_marked, "--read-option", 'na_values=["?"]', "--exclude", "5", "6", "--on-bad-rows", "drop"]) == 0
    )
    assert capsys.readouterr().out.startswith("ingested 58 rows (2 rejected), 4 features (0, 2, 3, 4), 2 groups by 1")


def test_dropping_rows_may_not_leave_fewer_than_two_groups_and_says_which_columns_cost_most(mostly_marked, capsys):
    assert main([*mostly_marked, "--read-option", 'na_values=["?"]', "--on-bad-rows", "drop"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "fairpca: error: dropping the rows with bad values left fewer than 2 groups of sensitive "
        "feature '1' (rows per group: "
    )
    assert (
        "59 of 60 rows (98.3%) were rejected (per column: '6': 59, '5': 40, '3': 2); to keep more rows leave "
        "out the worst (exclude=['6', '5']; command line: --exclude 6 5). Nothing was written." in err
    )
    assert main([*mostly_marked, "--read-option", 'na_values=["?"]']) == 2
    assert (
        "Columns '6', '5' are missing in more than half of the rows: leave them out to keep those rows "
        "(exclude=['6', '5']; command line: --exclude 6 5)"
    ) in capsys.readouterr().err


def test_rows_mostly_dropped_are_named_with_the_columns_that_cost_most(mostly_marked, capsys):
    assert main([*mostly_marked, "--read-option", 'na_values=["?"]', "--exclude", "6", "--on-bad-rows", "drop"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ingested 19 rows (41 rejected)")
    assert out[-1] == (
        "41 of 60 rows (68.3%) were rejected (per column: '5': 40, '3': 2); to keep more rows leave "
        "out the worst (exclude=['5']; command line: --exclude 5)"
    )


def test_the_sample_of_rejected_rows_of_a_relative_table_is_where_the_message_says(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _marked_csv(tmp_path / "marks.csv")
    args = ["ingest", "marks.csv", "lateq", "--sensitive-feature", "g", "--read-option", 'na_values=["?", "-"]']
    assert main(args) == 2
    assert "; a sample is in lateq.rejects.csv; " in capsys.readouterr().err
    assert (tmp_path / "lateq.rejects.csv").is_file() and not (tmp_path / "lateq").exists()
