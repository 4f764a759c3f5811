"""Ingestion: validated Parquet + schema.json; bad rows counted, sampled, never silently dropped."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import InputError, SchemaError, compute_moments
from fairpca_dist.io.ingest import ingest_table, read_schema, table_source


@pytest.fixture()
def source(tmp_path):
    x, labels = grouped_data(n_rows=1000, n_features=3)
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(id=np.arange(1000), sex=labels, y=np.arange(1000) % 2)
    path = tmp_path / "source.csv"
    frame.to_csv(path, index=False)
    return path, frame


def test_clean_table_roundtrip(source, tmp_path):
    path, frame = source
    result = ingest_table(
        str(path),
        tmp_path / "table",
        sensitive_feature="sex",
        key_columns=["id"],
        pass_through=["y"],
        read_options={"blocksize": 20_000},
    )
    assert result.rows == 1000 and result.rejected == 0
    schema = read_schema(tmp_path / "table")
    assert schema["features"] == ["a", "b", "c"] and schema["sensitive_feature"] == ["sex"]
    assert {g["label"]: g["rows"] for g in schema["groups"]} == frame["sex"].value_counts().to_dict()
    assert sum(p["rows"] for p in schema["partitions"]) == 1000 and len(schema["partitions"]) > 1
    back = pd.read_parquet(tmp_path / "table" / "parts").sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(back[["a", "b", "c"]], frame[["a", "b", "c"]])
    assert list(back.columns) == ["id", "sex", "y", "a", "b", "c"]
    direct = compute_moments(frame, sensitive_feature="sex", features=["a", "b", "c"])
    ingested = compute_moments(table_source(tmp_path / "table"), sensitive_feature="sex", features=schema["features"])
    np.testing.assert_allclose(ingested.scatter, direct.scatter, rtol=1e-10)


def test_bad_rows_fail_by_default_and_write_nothing(source, tmp_path):
    path, frame = source
    frame.loc[[3, 500], "b"] = np.nan
    frame.loc[7, "sex"] = None
    frame.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"3 row\(s\) have bad values .*'b': 2.*'sex \(missing group\)': 1"):
        ingest_table(str(path), tmp_path / "table", sensitive_feature="sex", key_columns=["id"])
    assert not (tmp_path / "table").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".table")]  # no staging left
    rejects = pd.read_csv(tmp_path / "table.rejects.csv")
    assert sorted(rejects["id"]) == [3, 7, 500]


def test_drop_policy_records_what_it_drops(source, tmp_path):
    path, frame = source
    frame.loc[[3, 500], "b"] = np.inf
    frame.to_csv(path, index=False)
    result = ingest_table(
        str(path), tmp_path / "table", sensitive_feature="sex", key_columns=["id"], on_bad_rows="drop"
    )
    assert result.rows == 998 and result.rejected == 2
    schema = json.loads((tmp_path / "table" / "schema.json").read_text())
    assert schema["rejected_by_column"] == {"b": 2}
    assert sorted(pd.read_csv(tmp_path / "table" / "rejects.csv")["id"]) == [3, 500]
    assert 3 not in set(pd.read_parquet(tmp_path / "table" / "parts")["id"])


def test_rerun_replaces_the_table_atomically_and_identically(source, tmp_path):
    path, _ = source
    ingest_table(str(path), tmp_path / "table", sensitive_feature="sex")
    first = {p.name: p.read_bytes() for p in (tmp_path / "table").rglob("*") if p.is_file()}
    ingest_table(str(path), tmp_path / "table", sensitive_feature="sex")
    assert {p.name: p.read_bytes() for p in (tmp_path / "table").rglob("*") if p.is_file()} == first


def test_schema_errors_before_reading(source, tmp_path):
    path, _ = source
    with pytest.raises(SchemaError, match="did you mean 'sex'"):
        ingest_table(str(path), tmp_path / "t", sensitive_feature="sx")
    with pytest.raises(InputError, match="on_bad_rows='skip'"):
        ingest_table(str(path), tmp_path / "t", sensitive_feature="sex", on_bad_rows="skip")
    with pytest.raises(InputError, match="does not exist"):
        ingest_table(str(tmp_path / "missing.csv"), tmp_path / "t", sensitive_feature="sex")
