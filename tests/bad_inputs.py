"""The bad-input campaign (issue 16): one :class:`Case` per malformed input.

Each case builds its input under ``inp`` (a fresh folder), runs one entry point writing under
``out`` (a fresh folder, empty or holding a previous output), and expects either an error of
a given type whose message matches ``pattern`` (which names the file, column, group or value
at fault) or a documented handling, checked by ``check``. ``tests/test_bad_inputs.py`` runs
them and checks that nothing partial is left in ``out``; README.md ("Bad input: what each
case gets") lists every case.

Kinds: ``library`` (a Python call raises), ``cli`` (``fairpca_dist.cli.main`` returns 2 and
prints one line ``fairpca: error: …``), ``usage`` (argparse rejects the argument: exit 2 and
its message), ``flow`` (a Prefect flow, under the test harness), ``handled`` (no error: the
documented handling, asserted by ``check``).
"""

from __future__ import annotations

import gzip
import json
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from fairpca_dist.exceptions import GroupError, InputError, OutputPathError, ReadError, SchemaError

__all__ = ["Case", "CASES"]


@dataclass(frozen=True)
class Case:
    id: str
    input: str  # what is malformed
    entry: str  # the entry point
    kind: str  # library | cli | usage | flow | handled
    act: Callable[[Path, Path], Any]  # (inp, out) -> result; builds its input first
    error: type[BaseException] | None = None
    pattern: str = ""  # regex the message must match (for handled cases: what the user gets, for the docs)
    check: Callable[[Any, Path, Path], None] | None = None  # handled cases: (result, inp, out)
    setup: Callable[[Path, Path], None] | None = None  # input or previous output, before the snapshot
    allowed: tuple[str, ...] = ()  # documented new entries in out (the rejects sample)


# ----------------------------------------------------------------------------- inputs
FEATURES = ["a", "b", "c"]


def frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": rng.normal(size=n),
            "id": np.arange(n) + 1000 * seed,
            "sex": np.where(np.arange(n) % 2, "f", "m"),
            "y": np.arange(n) % 2,
        }
    )


def parquet_folder(folder: Path, frames: list[pd.DataFrame]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(frames):
        part.to_parquet(folder / f"part-{i}.parquet", index=False)
    return folder


def csv(path: Path, data: pd.DataFrame, **options: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data.to_csv(path, index=False, **options)
    return path


def with_value(data: pd.DataFrame, column: str, row: int, value: Any) -> pd.DataFrame:
    data = data.copy()
    data[column] = data[column].astype(object)
    data.loc[row, column] = value
    if not isinstance(value, str):
        data[column] = data[column].astype(np.float64 if column in FEATURES or column == "w" else object)
    return data


def text_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ingested(inp: Path) -> Path:
    """A good ingested table and a fitted model under ``inp`` (table/, model/)."""
    from fairpca_dist.fitting import fit_table
    from fairpca_dist.io.ingest import ingest_table

    if not (inp / "model" / "model.json").is_file():
        ingest_table(
            frame(), inp / "table", sensitive_feature="sex", features=FEATURES, key_columns=["id"], pass_through=["y"]
        )
        fit_table(inp / "table", inp / "model", n_components=2, cache_dir=inp / "cache")
    return inp / "table"


def edited_model(
    inp: Path,
    edit_json: Callable[[dict], None] | None = None,
    edit_arrays: Callable[[dict], None] | None = None,
    cut: str | None = None,
) -> Path:
    ingested(inp)
    model = inp / "edited-model"
    shutil.copytree(inp / "model", model)
    if edit_json:
        record = json.loads((model / "model.json").read_text())
        edit_json(record)
        (model / "model.json").write_text(json.dumps(record))
    if edit_arrays:
        with np.load(model / "model.npz") as data:
            arrays = dict(data)
        edit_arrays(arrays)
        np.savez(model / "model.npz", **arrays)
    if cut:
        data = (model / cut).read_bytes()
        (model / cut).write_bytes(data[: len(data) // 2])
    return model


def previous_projection(inp: Path, out: Path) -> None:
    """A complete earlier output in out/projected: a failed projection must leave it as it was."""
    from fairpca_dist.io.ingest import table_source
    from fairpca_dist.io.model_io import load_model
    from fairpca_dist.projection import project_table

    table = ingested(inp)
    project_table(load_model(inp / "model"), table_source(table), out / "projected", pass_through=["id"])


def moments_of(data: Any, **roles: Any) -> Any:
    from fairpca_dist import compute_moments

    return compute_moments(data, **{"sensitive_feature": "sex", **roles})


def good_moments() -> Any:
    return moments_of(frame(), features=FEATURES)


# ----------------------------------------------------------------------------- entry points
def ingest(source: Any, out: Path, **roles: Any) -> Any:
    from fairpca_dist.io.ingest import ingest_table

    return ingest_table(source, out / "table", **{"sensitive_feature": "sex", **roles})


def fit_projection(*args: Any, **kwargs: Any) -> Any:
    from fairpca_dist import fit_projection as fit

    return fit(*args, **kwargs)


def fairpca(**params: Any) -> Any:
    from fairpca_dist import FairPCA

    return FairPCA(**params)


def fitted_estimator() -> Any:
    data = frame()
    return fairpca(n_components=2).fit(data[FEATURES], sensitive_features=data["sex"])


def fit_table(inp: Path, out: Path, table: Path | None = None, **params: Any) -> Any:
    from fairpca_dist.fitting import fit_table as fit

    table = ingested(inp) if table is None else table
    return fit(table, out / "model", cache_dir=inp / "cache", **{"n_components": 2, **params})


def project(model_dir: Path, source: Any, out: Path, **params: Any) -> Any:
    from fairpca_dist.io.model_io import load_model
    from fairpca_dist.projection import project_table

    return project_table(load_model(model_dir), source, out / "projected", **params)


def report(inp: Path, out: Path, sample: pd.DataFrame, target: str, moments: Any = None) -> Any:
    from fairpca_dist.assessment.report import build_report, write_report
    from fairpca_dist.io.model_io import load_model

    ingested(inp)
    built = build_report(
        good_moments() if moments is None else moments,
        load_model(inp / "model"),
        sample=sample,
        target=target,
        sensitive="sex",
        rbf_mmd="none",
        max_components=2,
    )
    return write_report(built, out / "report")


def project_table_call(model: Path, table: Path, out: Path) -> Any:
    from fairpca_dist.projection import project_table

    return project_table(model, table, out)


def cli(*argv: Any) -> int:
    from fairpca_dist.cli import main

    return main([str(a) for a in argv])


def flow_pipeline(source: Path, out: Path, **params: Any) -> Any:
    from fairpca_dist.flows.pipeline import pipeline

    return pipeline(
        source=str(source), sensitive_feature=["sex"], runs_dir=str(out), run_id="run", key_columns=["id"], **params
    )


# ----------------------------------------------------------------------------- issue 29: paths, OS errors, services
def _truncated_gzip(inp: Path) -> Path:
    path = csv(inp / "s.csv", frame())
    data = gzip.compress(path.read_bytes())
    (inp / "s.csv.gz").write_bytes(data[: len(data) // 2])
    return inp / "s.csv.gz"


def _link_loop(inp: Path) -> Path:
    inp.mkdir(parents=True, exist_ok=True)
    (inp / "loop.csv").symlink_to("loop.csv")
    return inp / "loop.csv"


def _parent_is_a_file(inp: Path, out: Path) -> None:
    (out / "notes.txt").write_text("mine")


def _foreign_folder(inp: Path, out: Path) -> None:
    (out / "photos").mkdir()
    (out / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")


def _model_without_moments(inp: Path) -> Path:
    ingested(inp)
    (inp / "model" / "moments.npz").unlink(missing_ok=True)
    return inp / "model"


def _latin1_csv(inp: Path) -> Path:
    inp.mkdir(parents=True, exist_ok=True)
    frame().assign(sex=lambda f: f["sex"].str.replace("f", "fé")).to_csv(inp / "s.csv", index=False, encoding="latin-1")
    return inp / "s.csv"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ----------------------------------------------------------------------------- checks of handled cases
def check_unicode(result: Any, inp: Path, out: Path) -> None:
    assert list(result.feature_names) == ["ä col ", " b", "c"], result.feature_names
    projected = pd.read_parquet(out / "projected")
    assert list(projected.columns) == ["id", "fairpca0", "fairpca1"] and len(projected) == 60


def check_empty_partition(result: Any, inp: Path, out: Path) -> None:
    from fairpca_dist import compute_moments

    assert result.rows == 120
    direct = compute_moments(pd.concat([frame(seed=0), frame(seed=2)]), sensitive_feature="sex", features=FEATURES)
    cached = moments_of(out / "table" / "parts", features=FEATURES)
    np.testing.assert_allclose(cached.scatter, direct.scatter, rtol=1e-10)


def check_reordered(result: Any, inp: Path, out: Path) -> None:
    from fairpca_dist.io.model_io import load_model

    projected = pd.read_parquet(out / "projected").sort_values("id")
    expected = load_model(inp / "model").transform(frame()[FEATURES].to_numpy())
    np.testing.assert_allclose(projected[["fairpca0", "fairpca1"]].to_numpy(), expected, atol=1e-12)


def check_other_version(result: Any, inp: Path, out: Path) -> None:
    from fairpca_dist.io.model_io import load_model

    assert json.loads((inp / "edited-model" / "model.json").read_text())["library_version"] == "0.0.1-other"
    np.testing.assert_array_equal(load_model(inp / "edited-model").components, load_model(inp / "model").components)
    assert result.rows == 60


def check_dup_header(result: Any, inp: Path, out: Path) -> None:
    assert result.schema["features"] == ["a", "a.1"], result.schema["features"]


def check_unused_category(result: Any, inp: Path, out: Path) -> None:
    assert result.groups == ("f", "m"), result.groups


def check_late_decimal(result: Any, inp: Path, out: Path) -> None:
    table = pd.read_parquet(out / "table" / "parts")
    assert result.rows == 6000 and table["a"].dtype == np.float64 and table["a"].iloc[5900] == 2.5


def check_no_header(result: Any, inp: Path, out: Path) -> None:
    assert result.schema["features"] == ["0", "1", "2"] and result.schema["sensitive_feature"] == ["4"]
    assert result.rows == 60 and [g["label"] for g in result.schema["groups"]] == ["f", "m"]


def check_text_default_features(result: Any, inp: Path, out: Path) -> None:
    assert result.schema["features"] == ["a", "c"], result.schema["features"]


def check_trailing_delimiter(result: Any, inp: Path, out: Path) -> None:
    assert result.schema["features"] == FEATURES and result.rows == 60, (result.schema["features"], result.rows)
    table = pd.read_parquet(out / "table" / "parts")
    np.testing.assert_allclose(table[FEATURES].to_numpy(), frame()[FEATURES].to_numpy(), rtol=1e-15)
    assert table["sex"].tolist() == frame()["sex"].tolist()


# ----------------------------------------------------------------------------- the cases
def _truncated_csv(inp: Path) -> Path:
    text = csv(inp / "full.csv", frame()).read_text()
    cut = inp / "truncated.csv"
    cut.write_text(text[: text.index("\n", len(text) // 2) + 12])  # the last line stops after two fields
    return cut


def _late_text_csv(inp: Path) -> Path:
    data = frame(2000)
    return csv(inp / "late.csv", with_value(data, "a", 1900, "n/a?"))


def _late_decimal_csv(inp: Path) -> Path:
    data = frame(6000).assign(a=lambda f: (10 * f["a"]).round().astype(int).astype(object))
    data.loc[5900, "a"] = 2.5  # dask types columns from the file's first 256 kB
    return csv(inp / "late.csv", data)


def _late_marker_csv(inp: Path) -> Path:
    data = frame(6000).astype({"a": object})
    data.loc[5900, "a"] = "?"
    return csv(inp / "late.csv", data)


def _trailing_delimiter_csv(inp: Path) -> Path:
    """Header 'a,b,c,sex', rows '0.12,-0.13,0.64,m,' (every data row ends with the delimiter)."""
    lines = frame()[[*FEATURES, "sex"]].to_csv(index=False).splitlines()
    return text_file(inp / "trailing.csv", "\n".join([lines[0], *(line + "," for line in lines[1:])]) + "\n")


def _one_file_wrong(inp: Path, change: Callable[[pd.DataFrame], pd.DataFrame], index: int = 1) -> Path:
    frames = [frame(seed=i) for i in range(3)]
    frames[index] = change(frames[index])
    return parquet_folder(inp / "source", frames)


def _corrupt(inp: Path, how: str) -> Path:
    folder = parquet_folder(inp / "source", [frame(seed=i) for i in range(3)])
    bad = folder / "part-1.parquet"
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2] if how == "truncate" else b"not parquet at all " * 40)
    return folder


def _duplicate_field_parquet(inp: Path) -> Path:
    inp.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        [pa.array([1.0, 2.0, 3.0, 4.0]), pa.array([4.0, 3.0, 1.0, 2.0]), pa.array(["m", "f"] * 2)],
        names=["a", "a", "sex"],
    )
    pq.write_table(table, inp / "dup.parquet")
    return inp / "dup.parquet"


def _empty_parquet(inp: Path) -> Path:
    inp.mkdir(parents=True, exist_ok=True)
    frame().iloc[:0].to_parquet(inp / "empty.parquet", index=False)
    return inp / "empty.parquet"


def _weights(value: float) -> pd.DataFrame:
    return with_value(frame().assign(w=1.0), "w", 7, value)


CASES: list[Case] = [
    # --- wrong dtypes
    Case(
        "text-feature-dataframe",
        "a feature column of a DataFrame holds text ('x1')",
        "ingest_table (DataFrame)",
        "library",
        lambda inp, out: ingest(with_value(frame(), "b", 3, "x1"), out, features=FEATURES),
        SchemaError,
        r"feature column 'b' has dtype \w+, expected a numeric dtype",
    ),
    Case(
        "text-feature-one-parquet-file",
        "one Parquet file of three stores feature 'b' as text ('x1')",
        "ingest_table (Parquet folder)",
        "library",
        lambda inp, out: ingest(_one_file_wrong(inp, lambda f: with_value(f, "b", 3, "x1").astype({"b": str})), out),
        SchemaError,
        r"feature column 'b' in partition 1 \(file \S*part-1\.parquet\) has 1 value\(s\) that are not "
        r"numbers \(first: 'x1'\)",
    ),
    Case(
        "text-feature-estimator",
        "a DataFrame column passed to FairPCA.fit holds text ('oops')",
        "FairPCA.fit",
        "library",
        lambda inp, out: fairpca(n_components=1).fit(
            with_value(frame(), "b", 4, "oops")[FEATURES], sensitive_features=frame()["sex"]
        ),
        SchemaError,
        r"feature column 'b' in the rows passed to fit has 1 value\(s\) that are not numbers "
        r"\(first: 'oops'\)",
    ),
    Case(
        "text-feature-default-features",
        "a CSV column meant as a feature holds one text value, no features= given",
        "ingest_table (CSV)",
        "handled",
        lambda inp, out: ingest(
            csv(inp / "t.csv", with_value(frame(), "b", 3, "x1")), out, key_columns=["id"], pass_through=["y"]
        ),
        pattern="the column is not numeric, so it is not a default feature: schema.json lists the features used",
        check=check_text_default_features,
    ),
    Case(
        "text-value-late-in-csv",
        "a CSV whose row 1900 has 'n/a?' in numeric column 'a'",
        "ingest_table (CSV)",
        "library",
        lambda inp, out: ingest(_late_text_csv(inp), out, features=FEATURES, read_options={"blocksize": 20_000}),
        ReadError,
        r"partition \d+ \(file \S*late\.csv\): column typed from the file's first rows holds other values "
        r"further down: 'a' \(read as float64\) holds 'n/a\?'\nTo read 'a' as found there: "
        r"read_options=\{'dtype': \{'a': 'object'\}\}",
    ),
    Case(
        "integer-feature-decimal-late-in-csv",
        "a CSV whose feature 'a' holds integers up to row 5900 and 2.5 there",
        "ingest_table (CSV)",
        "handled",
        lambda inp, out: ingest(_late_decimal_csv(inp), out, features=FEATURES),
        pattern="a CSV's features are read as float64 (dask would type 'a' as integer from the first rows): "
        "the table holds every row, 2.5 included",
        check=check_late_decimal,
    ),
    Case(
        "csv-question-mark-for-missing",
        "a CSV whose numeric column 'a' has '?' in row 5900 (UCI's marker of a missing value)",
        "ingest_table (CSV)",
        "library",
        lambda inp, out: ingest(_late_marker_csv(inp), out, features=FEATURES),
        ReadError,
        r"partition 0 \(file \S*late\.csv\): column typed from the file's first rows holds other values "
        r"further down: 'a' \(read as float64\) holds '\?'\nIf '\?' marks a missing value: "
        r"read_options=\{'na_values': \['\?'\]\}",
    ),
    Case(
        "csv-without-header",
        "a CSV without a header line, read with read_options={'header': None}",
        "ingest_table (CSV)",
        "handled",
        lambda inp, out: ingest(
            csv(inp / "h.csv", frame(), header=False),
            out,
            sensitive_feature="4",
            features=["0", "1", "2"],
            read_options={"header": None},
        ),
        pattern="columns are named by position as text ('0', '1', …), as the command line passes them",
        check=check_no_header,
    ),
    # --- NaN / inf / huge values
    Case(
        "nan-feature-ingest",
        "a NaN in feature 'a'",
        "ingest_table (DataFrame)",
        "library",
        lambda inp, out: ingest(with_value(frame(), "a", 5, np.nan), out, features=FEATURES),
        InputError,
        r"1 row\(s\) have bad values \(per column: 'a': 1\); a sample is in \S*table\.rejects\.csv",
        allowed=("table.rejects.csv",),
    ),
    Case(
        "nan-feature-csv-moments",
        "a NaN in feature 'a' of a CSV file",
        "compute_moments (CSV)",
        "library",
        lambda inp, out: moments_of(csv(inp / "nan.csv", with_value(frame(), "a", 5, np.nan)), features=FEATURES),
        InputError,
        r"non-finite feature values in partition 0 \(file \S*nan\.csv\): 'a': 1 \(NaN\)",
    ),
    Case(
        "inf-feature-moments",
        "an inf in feature 'b'",
        "compute_moments (DataFrame)",
        "library",
        lambda inp, out: moments_of(with_value(frame(), "b", 2, np.inf), features=FEATURES),
        InputError,
        r"non-finite feature values in partition 0: 'b': 1 \(inf\)",
    ),
    Case(
        "nan-feature-transform",
        "a NaN in feature 'c' at transform",
        "FairPCA.transform",
        "library",
        lambda inp, out: fitted_estimator().transform(with_value(frame(), "c", 9, np.nan)[FEATURES]),
        InputError,
        r"non-finite feature values in the rows passed to transform: 'c': 1 \(NaN\)",
    ),
    Case(
        "huge-values-1e300",
        "feature 'a' scaled to 1e300 (finite, squares overflow)",
        "compute_moments",
        "library",
        lambda inp, out: moments_of(frame().assign(a=frame()["a"] * 1e300), features=FEATURES),
        InputError,
        r"overflow float64 when squared \(largest \|value\| \S+e\+300 in 'a'\); rescale the column",
    ),
    Case(
        "huge-values-1e300-fit-table",
        "an ingested table whose feature 'a' is ~1e300",
        "fit_table",
        "library",
        lambda inp, out: fit_table(inp, out, table=inp / "table"),
        InputError,
        r"partition 0 \(file \S*part-00000\.parquet\) overflow float64 .* in 'a'",
        setup=lambda inp, out: (
            ingest(frame().assign(a=frame()["a"] * 1e300), inp, features=FEATURES, key_columns=["id"]),
            None,
        )[1],
    ),
    # --- empty table, empty group, single row, small groups
    Case(
        "empty-dataframe",
        "a DataFrame with the columns and no rows",
        "ingest_table (DataFrame)",
        "library",
        lambda inp, out: ingest(frame().iloc[:0], out, features=FEATURES),
        InputError,
        r"the DataFrame has no rows",
    ),
    Case(
        "empty-parquet-file",
        "a Parquet file with the schema and no rows",
        "ingest_table (Parquet)",
        "library",
        lambda inp, out: ingest(_empty_parquet(inp), out, features=FEATURES),
        InputError,
        r"\S*empty\.parquet has no rows",
    ),
    Case(
        "empty-csv-file",
        "a zero-byte CSV file",
        "ingest_table (CSV)",
        "library",
        lambda inp, out: ingest(text_file(inp / "e.csv", ""), out),
        ReadError,
        r"cannot read '\S*e\.csv' as CSV: .*No columns to parse",
    ),
    Case(
        "empty-table-moments",
        "a DataFrame with no rows",
        "compute_moments",
        "library",
        lambda inp, out: moments_of(frame().iloc[:0], features=FEATURES),
        GroupError,
        r"0 group\(s\) \(no rows at all\)",
    ),
    Case(
        "empty-group-zero-weight",
        "every row of group 'f' has sample weight 0",
        "FairPCA.fit",
        "library",
        lambda inp, out: fairpca(n_components=1).fit(
            frame()[FEATURES],
            sensitive_features=frame()["sex"],
            sample_weight=np.where(frame()["sex"] == "f", 0.0, 1.0),
        ),
        GroupError,
        r"groups with zero total sample weight: \['f'\]",
    ),
    Case(
        "empty-group-unused-category",
        "a categorical group column with a category no row has ('other')",
        "compute_moments",
        "handled",
        lambda inp, out: moments_of(
            frame().assign(sex=pd.Categorical(frame()["sex"], ["f", "m", "other"])), features=FEATURES
        ),
        pattern="groups are the labels rows carry: the unused category is not a group",
        check=check_unused_category,
    ),
    Case(
        "one-group",
        "every row in group 'm'",
        "compute_moments",
        "library",
        lambda inp, out: moments_of(frame().assign(sex="m"), features=FEATURES),
        GroupError,
        r"defines 1 group\(s\) \(only group 'm'\)",
    ),
    Case(
        "single-row-moments",
        "a table of one row",
        "compute_moments",
        "library",
        lambda inp, out: moments_of(frame().iloc[:1], features=FEATURES),
        GroupError,
        r"defines 1 group\(s\) \(only group 'm'\)",
    ),
    Case(
        "single-row-estimator",
        "one row passed to FairPCA.fit",
        "FairPCA.fit",
        "library",
        lambda inp, out: fairpca(n_components=1).fit(frame()[FEATURES].iloc[:1], sensitive_features=["m"]),
        InputError,
        r"Found array with 1 sample\(s\)",
    ),
    Case(
        "group-too-small",
        "group 'z' has one row",
        "compute_moments",
        "library",
        lambda inp, out: moments_of(with_value(frame(), "sex", 0, "z"), features=FEATURES),
        GroupError,
        r"1 group\(s\) with fewer than 2 rows: 'z': 1 row\(s\)",
    ),
    Case(
        "nan-group-label",
        "a missing label in the group column of a Parquet file",
        "compute_moments (Parquet)",
        "library",
        lambda inp, out: moments_of(
            parquet_folder(inp / "src", [with_value(frame(), "sex", 4, None)]), features=FEATURES
        ),
        GroupError,
        r"sensitive feature 'sex' has 1 missing label\(s\) in partition 0 \(file \S*part-0\.parquet\)",
    ),
    Case(
        "nan-group-label-ingest",
        "a missing label in the group column",
        "ingest_table",
        "library",
        lambda inp, out: ingest(with_value(frame(), "sex", 4, None), out, features=FEATURES),
        InputError,
        r"per column: 'sex \(missing group\)': 1\)",
        allowed=("table.rejects.csv",),
    ),
    Case(
        "negative-weight",
        "sample weight -1 in row 7",
        "compute_moments",
        "library",
        lambda inp, out: moments_of(_weights(-1.0), features=FEATURES, sample_weight="w"),
        InputError,
        r"sample_weight has 1 missing, infinite or negative value\(s\) in partition 0 \(first: .*-1\.0",
    ),
    Case(
        "nan-weight-estimator",
        "sample weight NaN in row 7",
        "FairPCA.fit",
        "library",
        lambda inp, out: fairpca(n_components=1).fit(
            frame()[FEATURES], sensitive_features=frame()["sex"], sample_weight=_weights(np.nan)["w"]
        ),
        InputError,
        r"sample_weight must be finite and non-negative: 1 value\(s\) are not \(first: .*nan.* at row 7\)",
    ),
    Case(
        "tiny-scale-column-standardize",
        "feature 'c' of scale 1e-300 (it varies; its squares underflow), standardize=True",
        "fit_projection",
        "library",
        lambda inp, out: fit_projection(
            moments_of(frame().assign(c=lambda f: f["c"] * 1e-300), features=FEATURES), 2, standardize=True
        ),
        SchemaError,
        r"feature\(s\) 'c' \(values of order \S+e-30\d\) vary, but their variance underflows float64 "
        r".*multiply 'c' by 1e\+30\d",
    ),
    Case(
        "constant-column-standardize",
        "feature 'c' is constant, standardize=True",
        "fit_projection",
        "library",
        lambda inp, out: fit_projection(moments_of(frame().assign(c=3.0), features=FEATURES), 2, standardize=True),
        SchemaError,
        r"feature\(s\) \['c'\] have zero variance",
    ),
    # --- column names and schemas
    Case(
        "duplicated-columns-dataframe",
        "a DataFrame with two columns named 'a'",
        "ingest_table (DataFrame)",
        "library",
        lambda inp, out: ingest(frame().set_axis(["a", "a", "c", "id", "sex", "y"], axis=1), out),
        SchemaError,
        r"column name\(s\) \['a'\] appear more than once",
    ),
    Case(
        "duplicated-columns-parquet",
        "a Parquet file with two fields named 'a'",
        "compute_moments (Parquet)",
        "library",
        lambda inp, out: moments_of(_duplicate_field_parquet(inp)),
        ReadError,
        r"cannot read '\S*dup\.parquet' as Parquet.*duplicate field names",
    ),
    Case(
        "duplicated-columns-csv",
        "a CSV header 'a,a,sex'",
        "ingest_table (CSV)",
        "handled",
        lambda inp, out: ingest(
            csv(
                inp / "dup.csv",
                pd.DataFrame({"a": [1.0, 2, 3, 4], "a2": [4.0, 3, 1, 2], "sex": ["m", "f"] * 2}).set_axis(
                    ["a", "a", "sex"], axis=1
                ),
            ),
            out,
        ),
        pattern="the CSV reader renames the second 'a' to 'a.1'; schema.json lists it as a feature",
        check=check_dup_header,
    ),
    Case(
        "unicode-whitespace-columns",
        "feature columns named 'ä col ' and ' b'",
        "ingest_table + fit_table + project_table",
        "handled",
        lambda inp, out: _unicode_pipeline(inp, out),
        pattern="unicode and whitespace in column names work: names are kept exactly",
        check=check_unicode,
    ),
    Case(
        "missing-sensitive-column",
        "sensitive_feature='sexx' (misspelt)",
        "compute_moments",
        "library",
        lambda inp, out: moments_of(frame(), sensitive_feature="sexx"),
        SchemaError,
        r"sensitive feature column 'sexx' not found; did you mean 'sex'\?",
    ),
    Case(
        "unknown-feature-column",
        "features=['a', 'bb'] (misspelt)",
        "ingest_table (CSV)",
        "library",
        lambda inp, out: ingest(csv(inp / "s.csv", frame()), out, features=["a", "bb"]),
        SchemaError,
        r"feature column 'bb' not found in '\S*s\.csv'; did you mean 'b'\?",
    ),
    Case(
        "missing-column-one-parquet-file",
        "the third Parquet file lacks feature 'c'",
        "ingest_table (Parquet folder)",
        "library",
        lambda inp, out: ingest(_one_file_wrong(inp, lambda f: f.drop(columns="c"), index=2), out),
        ReadError,
        r"cannot read partition 2 \(file \S*part-2\.parquet\): .*'c'",
    ),
    Case(
        "empty-partition-parquet",
        "a zero-row Parquet file between two others",
        "ingest_table (Parquet folder)",
        "handled",
        lambda inp, out: ingest(_one_file_wrong(inp, lambda f: f.iloc[:0]), out, features=FEATURES),
        pattern="an empty file contributes no rows: the table and its moments are those of the other files",
        check=check_empty_partition,
    ),
    # --- corrupt and truncated files, delimiters
    Case(
        "corrupt-parquet-file",
        "one Parquet file of three is garbage",
        "ingest_table (Parquet folder)",
        "library",
        lambda inp, out: ingest(_corrupt(inp, "garbage"), out),
        ReadError,
        r"as Parquet \(file \S*part-1\.parquet: Parquet magic bytes not found",
    ),
    Case(
        "truncated-parquet-file",
        "one Parquet file of three cut in half",
        "compute_moments (Parquet folder)",
        "library",
        lambda inp, out: moments_of(_corrupt(inp, "truncate")),
        ReadError,
        r"as Parquet \(file \S*part-1\.parquet: ",
    ),
    Case(
        "truncated-csv",
        "a CSV whose last line stops after two fields",
        "ingest_table (CSV)",
        "library",
        lambda inp, out: ingest(_truncated_csv(inp), out),
        InputError,
        r"1 row\(s\) have bad values \(per column: 'b': 1, 'c': 1, 'id': 1, 'sex \(missing group\)': 1, 'y': 1\); "
        r"a sample is in \S*table\.rejects\.csv",
        allowed=("table.rejects.csv",),
    ),
    Case(
        "csv-semicolon-delimiter",
        "a CSV separated by ';'",
        "ingest_table (CSV)",
        "library",
        lambda inp, out: ingest(csv(inp / "semi.csv", frame(), sep=";"), out),
        SchemaError,
        r"'sex' not found in '\S*semi\.csv'.*seems to use ';' as delimiter: "
        r"pass read_options=\{'sep': ';'\} \(command line: --read-option 'sep=.;.'\)",
    ),
    Case(
        "csv-trailing-delimiter",
        "a CSV whose data rows end with a delimiter ('a,b,c,sex' then '1,2,3,f,')",
        "ingest_table (CSV)",
        "handled",
        lambda inp, out: ingest(_trailing_delimiter_csv(inp), out),
        pattern="the rows are read under their header (the empty last field is dropped; a value there is a "
        "ReadError naming the file)",
        check=check_trailing_delimiter,
    ),
    # --- model artifacts
    Case(
        "model-other-format-version",
        "model.json says format_version 99",
        "load_model + project_table",
        "library",
        lambda inp, out: project(edited_model(inp, lambda r: r.update(format_version=99)), inp / "table", out),
        InputError,
        r"model\.json: unsupported model format 99",
    ),
    Case(
        "model-other-library-version",
        "model.json written by library version '0.0.1-other' (same format)",
        "load_model + project_table",
        "handled",
        lambda inp, out: project(
            edited_model(inp, lambda r: r.update(library_version="0.0.1-other")), inp / "table" / "parts", out
        ),
        pattern="loads and projects: the format version, not the library version, decides",
        check=check_other_version,
    ),
    Case(
        "model-json-truncated",
        "model.json cut in half",
        "load_model",
        "library",
        lambda inp, out: project(edited_model(inp, cut="model.json"), inp / "table", out),
        InputError,
        r"\S*edited-model/model\.json is not valid JSON",
    ),
    Case(
        "model-npz-truncated",
        "model.npz cut in half",
        "load_model",
        "library",
        lambda inp, out: project(edited_model(inp, cut="model.npz"), inp / "table", out),
        InputError,
        r"\S*edited-model/model\.npz cannot be read",
    ),
    Case(
        "model-components-edited",
        "model.npz components with 2 rows for 3 features",
        "load_model",
        "library",
        lambda inp, out: project(
            edited_model(inp, edit_arrays=lambda a: a.update(components=a["components"][:2])), inp / "table", out
        ),
        InputError,
        r"model\.npz: components has shape \(2, 2\), but model\.json lists 3 feature\(s\) \['a', 'b', 'c'\]",
    ),
    Case(
        "model-features-edited",
        "model.json lists features ['a', 'b'] for a 3-feature model",
        "load_model",
        "library",
        lambda inp, out: project(edited_model(inp, lambda r: r.update(feature_names=["a", "b"])), inp / "table", out),
        InputError,
        r"components has shape \(3, 2\), but model\.json lists 2 feature\(s\) \['a', 'b'\]",
    ),
    Case(
        "model-field-null",
        "model.json's 'diagnostics.converged' is null",
        "load_model",
        "library",
        lambda inp, out: project(
            edited_model(inp, lambda r: r["diagnostics"].update(converged=None)), inp / "table", out
        ),
        InputError,
        r"model\.json: field 'diagnostics\.converged' is null, expected true or false",
    ),
    Case(
        "model-field-wrong-type",
        "model.json's 'n_components' is the text '2'",
        "load_model",
        "library",
        lambda inp, out: project(edited_model(inp, lambda r: r.update(n_components="2")), inp / "table", out),
        InputError,
        r"model\.json: field 'n_components' is '2', expected a whole number",
    ),
    Case(
        "model-components-complex",
        "model.npz holds complex components",
        "load_model",
        "library",
        lambda inp, out: project(
            edited_model(inp, edit_arrays=lambda a: a.update(components=a["components"].astype(complex))),
            inp / "table",
            out,
        ),
        InputError,
        r"model\.npz: components holds complex numbers \(dtype complex128\); a model's arrays hold "
        r"real numbers",
    ),
    Case(
        "model-folder-missing",
        "a model folder that does not exist",
        "load_model",
        "library",
        lambda inp, out: project(inp / "no-model", ingested(inp), out),
        InputError,
        r"model folder \S*no-model does not exist \(fit_table, on the command line `fairpca fit`, "
        r"writes one\)",
    ),
    Case(
        "model-field-missing",
        "model.json without its 'diagnostics'",
        "load_model",
        "library",
        lambda inp, out: project(edited_model(inp, lambda r: r.pop("diagnostics")), inp / "table", out),
        InputError,
        r"model\.json lacks the field 'diagnostics'",
    ),
    Case(
        "model-on-other-columns",
        "a table whose column 'c' is named 'cc'",
        "project_table",
        "library",
        lambda inp, out: project(
            inp / "model",
            parquet_folder(inp / "other", [frame().rename(columns={"c": "cc"})]),
            out,
            pass_through=["id"],
        ),
        SchemaError,
        r"feature column 'c' not found in '\S*other'; did you mean 'cc'\?",
        setup=previous_projection,
    ),
    Case(
        "model-on-reordered-columns",
        "a table with the features in order c, b, a",
        "project_table",
        "handled",
        lambda inp, out: project(
            inp / "model", parquet_folder(inp / "reordered", [frame()[["c", "b", "a", "id"]]]), out, pass_through=["id"]
        ),
        pattern="columns are matched by name: the output equals that of the fitted order",
        check=check_reordered,
        setup=lambda inp, out: (ingested(inp), None)[1],
    ),
    Case(
        "model-on-nan-rows",
        "a NaN in feature 'b' of the table to project",
        "project_table",
        "library",
        lambda inp, out: project(
            inp / "model", parquet_folder(inp / "nan", [with_value(frame(), "b", 7, np.nan)]), out, pass_through=["id"]
        ),
        InputError,
        r"non-finite feature values in partition 0 \(file \S*part-0\.parquet\): 'b': 1 \(NaN\)",
        setup=previous_projection,
    ),
    Case(
        "transform-reordered-columns",
        "FairPCA.transform of a DataFrame with the columns in order c, b, a",
        "FairPCA.transform",
        "library",
        lambda inp, out: fitted_estimator().transform(frame()[["c", "b", "a"]]),
        SchemaError,
        r"same order as they were in fit.*columns at fit: \['a', 'b', 'c'\]; X has: \['c', 'b', 'a'\]",
    ),
    Case(
        "transform-other-columns",
        "FairPCA.transform of a DataFrame with 'y' instead of 'c'",
        "FairPCA.transform",
        "library",
        lambda inp, out: fitted_estimator().transform(frame()[["a", "b", "y"]]),
        SchemaError,
        r"unseen at fit time: - y .*now missing: - c",
    ),
    # --- n_components and options
    Case(
        "n-components-zero",
        "n_components=0",
        "fit_projection",
        "library",
        lambda inp, out: fit_projection(good_moments(), 0),
        InputError,
        r"n_components=0 must be between 1 and n_features=3",
    ),
    Case(
        "n-components-above-p",
        "n_components=4 for 3 features",
        "fit_table",
        "library",
        lambda inp, out: fit_table(inp, out, n_components=4),
        InputError,
        r"n_components=4 must be between 1 and n_features=3",
    ),
    Case(
        "n-components-float",
        "n_components=2.5",
        "FairPCA",
        "library",
        lambda inp, out: fairpca(n_components=2.5).fit(frame()[FEATURES], sensitive_features=frame()["sex"]),
        InputError,
        r"n_components must be a positive integer or None, got 2\.5",
    ),
    Case(
        "n-components-bool",
        "n_components=True",
        "fit_projection",
        "library",
        lambda inp, out: fit_projection(good_moments(), True),
        InputError,
        r"n_components must be an integer, got True",
    ),
    Case(
        "option-tol-text",
        "tol='abc' for fair-eig",
        "fit_table",
        "library",
        lambda inp, out: fit_table(inp, out, method="fair-eig", options={"tol": "abc"}),
        InputError,
        r"tol must be a positive number, got 'abc'",
    ),
    Case(
        "option-max-iter-float",
        "max_iter=1.5 for samadi-mw",
        "FairPCA.fit",
        "library",
        lambda inp, out: fairpca(n_components=1, method="samadi-mw", method_options={"max_iter": 1.5}).fit(
            frame()[FEATURES], sensitive_features=frame()["sex"]
        ),
        InputError,
        r"max_iter must be a positive integer, got 1\.5",
    ),
    Case(
        "option-unknown",
        "option 'tolerance' for fair-eig",
        "fit_projection",
        "library",
        lambda inp, out: fit_projection(good_moments(), 1, method="fair-eig", tolerance=1e-6),
        InputError,
        r"unknown option\(s\) \['tolerance'\] for method 'fair-eig'; valid options: \['max_iter', 'tol'\]",
    ),
    # --- report
    Case(
        "report-non-binary-target",
        "target 'y' with 3 classes",
        "build_report (downstream_parity)",
        "library",
        lambda inp, out: report(inp, out, frame().assign(y=np.arange(60) % 3), "y"),
        InputError,
        r"target 'y' has 3 class\(es\) \[0, 1, 2\]; demographic parity needs a binary target",
    ),
    Case(
        "report-target-is-feature",
        "target 'a' is a feature column",
        "build_report (downstream_parity)",
        "library",
        lambda inp, out: report(inp, out, frame(), "a"),
        SchemaError,
        r"target 'a' is also a feature or sensitive column",
    ),
    Case(
        "report-moments-other-features",
        "moments of features a, b for a model of a, b, c",
        "build_report",
        "library",
        lambda inp, out: report(inp, out, frame(), "y", moments=moments_of(frame(), features=["a", "b"])),
        SchemaError,
        r"the model was fitted on other features than the moments have: only in the model: 'c'",
    ),
    # --- the command line
    Case(
        "cli-ingest-missing-column",
        "fairpca ingest --sensitive-feature sx",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli("ingest", csv(inp / "s.csv", frame()), out / "table", "--sensitive-feature", "sx"),
        InputError,
        r"sensitive feature column 'sx' not found in '\S*s\.csv'; did you mean 'sex'\?",
    ),
    Case(
        "cli-ingest-corrupt-parquet",
        "fairpca ingest of a folder with a garbage Parquet file",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli("ingest", _corrupt(inp, "garbage"), out / "table", "--sensitive-feature", "sex"),
        InputError,
        r"as Parquet \(file \S*part-1\.parquet: ",
    ),
    Case(
        "cli-ingest-truncated-csv",
        "fairpca ingest of a truncated CSV",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli("ingest", _truncated_csv(inp), out / "table", "--sensitive-feature", "sex"),
        InputError,
        r"1 row\(s\) have bad values \(.*'sex \(missing group\)': 1.*\); "
        r"a sample is in \S*table\.rejects\.csv",
        allowed=("table.rejects.csv",),
    ),
    # --- issue 29: overlapping paths, OS errors, unreachable services
    Case(
        "cli-ingest-truncated-gzip",
        "a .csv.gz cut in half",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli("ingest", _truncated_gzip(inp), out / "table", "--sensitive-feature", "sex"),
        InputError,
        r"cannot read '\S*s\.csv\.gz': the compressed file is truncated or damaged",
    ),
    Case(
        "cli-ingest-symlink-loop",
        "the source is a symbolic link to itself",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli("ingest", _link_loop(inp), out / "table", "--sensitive-feature", "sex"),
        InputError,
        r"cannot read '\S*loop\.csv': a symbolic link in the path points back to itself",
    ),
    Case(
        "cli-ingest-misspelt-read-option",
        "--read-option delimeter=;",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli(
            "ingest",
            csv(inp / "s.csv", frame()),
            out / "table",
            "--sensitive-feature",
            "sex",
            "--read-option",
            "delimeter=;",
        ),
        InputError,
        r"read options \{'delimeter': ';'\} are not accepted by the CSV reader: .*did you mean "
        r"'delimiter'\?",
    ),
    Case(
        "cli-ingest-read-option-wrong-type",
        "--read-option sep=1 (a number)",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli(
            "ingest", csv(inp / "s.csv", frame()), out / "table", "--sensitive-feature", "sex", "--read-option", "sep=1"
        ),
        InputError,
        r"read options \{'sep': 1\} are not accepted by the CSV reader: TypeError",
    ),
    Case(
        "cli-ingest-output-parent-is-a-file",
        "the output's parent folder is a file",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli(
            "ingest", csv(inp / "s.csv", frame()), out / "notes.txt" / "table", "--sensitive-feature", "sex"
        ),
        OSError,
        r"could not write \S*notes\.txt/table: a parent in the path is a file, not a folder",
        setup=_parent_is_a_file,
    ),
    Case(
        "cli-ingest-output-is-the-source",
        "fairpca ingest SRC_DIR SRC_DIR",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli(
            "ingest", parquet_folder(inp / "source", [frame()]), inp / "source", "--sensitive-feature", "sex"
        ),
        InputError,
        r"output '\S*source' is the input '\S*source': writing it would destroy the input",
    ),
    Case(
        "cli-project-output-is-the-table",
        "fairpca project MODEL TABLE TABLE/parts",
        "fairpca project",
        "cli",
        lambda inp, out: cli("project", ingested(inp) and inp / "model", inp / "table", inp / "table" / "parts"),
        InputError,
        r"output '\S*table/parts' lies inside the input '\S*table'",
    ),
    Case(
        "cli-project-output-is-the-model",
        "fairpca project MODEL TABLE MODEL",
        "fairpca project",
        "cli",
        lambda inp, out: cli("project", ingested(inp) and inp / "model", inp / "table", inp / "model"),
        InputError,
        r"output '\S*model' is the input '\S*model'",
    ),
    Case(
        "cli-project-output-is-a-file",
        "the output folder is an existing file",
        "fairpca project",
        "cli",
        lambda inp, out: cli("project", ingested(inp) and inp / "model", inp / "table", out / "notes.txt"),
        InputError,
        r"output '\S*notes\.txt' is an existing file, where a folder is to be written",
        setup=_parent_is_a_file,
    ),
    Case(
        "cli-project-output-foreign-folder",
        "the output folder holds files project did not write",
        "fairpca project",
        "cli",
        lambda inp, out: cli("project", ingested(inp) and inp / "model", inp / "table", out / "photos"),
        InputError,
        r"output \S*photos is a folder with other files in it \(no _SUCCESS",
        setup=_foreign_folder,
    ),
    Case(
        "cli-fit-output-inside-table",
        "fairpca fit TABLE TABLE/model",
        "fairpca fit",
        "cli",
        lambda inp, out: cli("fit", ingested(inp), inp / "table" / "model"),
        InputError,
        r"output '\S*table/model' lies inside the input '\S*table'",
    ),
    Case(
        "cli-report-model-without-moments",
        "a model folder without moments.npz",
        "fairpca report",
        "cli",
        lambda inp, out: cli("report", _model_without_moments(inp), inp / "table", out / "report"),
        InputError,
        r"\S*model/moments\.npz is missing: the report needs the moments fit_table writes",
    ),
    Case(
        "cli-report-output-is-the-model",
        "fairpca report MODEL TABLE MODEL",
        "fairpca report",
        "cli",
        lambda inp, out: cli("report", ingested(inp) and inp / "model", inp / "table", inp / "model"),
        InputError,
        r"output '\S*model' is the input '\S*model'",
    ),
    Case(
        "cli-dask-address-malformed",
        "--dask-address localhost:notaport",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli(
            "ingest",
            csv(inp / "s.csv", frame()),
            out / "table",
            "--sensitive-feature",
            "sex",
            "--dask-address",
            "localhost:notaport",
        ),
        InputError,
        r"dask address 'localhost:notaport' is not an address of a Dask scheduler: .*tcp://HOST:PORT",
    ),
    Case(
        "cli-dask-address-unreachable",
        "--dask-address of a port nothing listens on (10 s)",
        "fairpca fit",
        "cli",
        lambda inp, out: cli("fit", ingested(inp), out / "model", "--dask-address", f"tcp://127.0.0.1:{_free_port()}"),
        ConnectionError,
        r"no Dask scheduler answers at tcp://127\.0\.0\.1:\d+ \(waited 10 s",
    ),
    Case(
        "cli-ingest-latin1-csv",
        "a CSV in Latin-1 (an 'é' in a group label)",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli("ingest", _latin1_csv(inp), out / "table", "--sensitive-feature", "sex"),
        InputError,
        r"UnicodeDecodeError: .* The file is not UTF-8 text: give its encoding, e\.g\. "
        r"read_options=\{'encoding': 'latin-1'\} \(command line: --read-option encoding=latin-1\)",
    ),
    Case(
        "cli-ingest-unknown-encoding",
        "--read-option encoding=no-such-codec",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli(
            "ingest",
            csv(inp / "s.csv", frame()),
            out / "table",
            "--sensitive-feature",
            "sex",
            "--read-option",
            "encoding=no-such-codec",
        ),
        InputError,
        r"read options \{'encoding': 'no-such-codec'\} are not accepted by the CSV reader: "
        r"LookupError: unknown encoding",
    ),
    Case(
        "cli-ingest-brackets-in-file-name",
        "a source file named data[1].csv",
        "fairpca ingest",
        "cli",
        lambda inp, out: cli("ingest", csv(inp / "data[1].csv", frame()), out / "table", "--sensitive-feature", "sex"),
        InputError,
        r"'\S*data\[1\]\.csv' is read as a pattern .* though a file of that name exists: rename it",
    ),
    Case(
        "project-output-through-symlink",
        "project_table to a symbolic link of the table's folder",
        "project_table",
        "library",
        lambda inp, out: (
            ingested(inp),
            (inp / "link").symlink_to(inp / "table"),
            project_table_call(inp / "model", inp / "table", inp / "link" / "parts"),
        ),
        OutputPathError,
        r"output '\S*link/parts' lies inside the input '\S*table'",
    ),
    Case(
        "cli-fit-n-components-above-p",
        "fairpca fit --n-components 7 (3 features)",
        "fairpca fit",
        "cli",
        lambda inp, out: cli("fit", ingested(inp), out / "model", "--n-components", "7"),
        InputError,
        r"n_components=7 must be between 1 and n_features=3",
    ),
    Case(
        "cli-fit-option-wrong-type",
        "fairpca fit --option tol=abc",
        "fairpca fit",
        "cli",
        lambda inp, out: cli("fit", ingested(inp), out / "model", "--option", "tol=abc"),
        InputError,
        r"tol must be a positive number, got 'abc'",
    ),
    Case(
        "cli-demo-negative-synthetic-rows",
        "fairpca demo --synthetic-rows -5",
        "fairpca demo",
        "usage",
        lambda inp, out: cli("demo", "--synthetic-rows", "-5", "--runs-dir", out / "runs"),
        SystemExit,
        r"argument --synthetic-rows: must be a number of rows, or 0 for the diabetes table; got -5",
    ),
    Case(
        "cli-fit-n-components-zero",
        "fairpca fit --n-components 0",
        "fairpca fit",
        "usage",
        lambda inp, out: cli("fit", ingested(inp), out / "model", "--n-components", "0"),
        SystemExit,
        r"argument --n-components: must be a positive integer, got 0",
    ),
    Case(
        "cli-project-truncated-model",
        "fairpca project with model.npz cut in half",
        "fairpca project",
        "cli",
        lambda inp, out: cli("project", edited_model(inp, cut="model.npz"), inp / "table", out / "projected"),
        InputError,
        r"\S*model\.npz cannot be read",
    ),
    Case(
        "cli-report-non-binary-target",
        "fairpca report --target id (60 classes)",
        "fairpca report",
        "cli",
        lambda inp, out: cli("report", inp / "model", ingested(inp), out / "report", "--target", "id"),
        InputError,
        r"target 'id' has 60 class\(es\)",
    ),
    Case(
        "cli-report-target-not-ingested",
        "fairpca report --target c_label, a column ingest did not keep",
        "fairpca report",
        "cli",
        lambda inp, out: cli("report", inp / "model", ingested(inp), out / "report", "--target", "c_label"),
        InputError,
        r"target 'c_label' is not a column of the ingested table \S+ \(it kept \['y', 'id'\] beside the "
        r"features and \['sex'\]\): ingest it with pass_through=\['c_label'\] \(command line: "
        r"--pass-through c_label\)",
    ),
    Case(
        "cli-fit-missing-table",
        "fairpca fit of a table folder that does not exist",
        "fairpca fit",
        "cli",
        lambda inp, out: cli("fit", inp / "no-such-table", out / "model"),
        InputError,
        r"table folder \S+no-such-table does not exist \(ingest_table, on the command line `fairpca "
        r"ingest`, writes one\)",
    ),
    # --- the Prefect flows
    Case(
        "flow-pipeline-nan-rows",
        "a NaN in feature 'a' of the source CSV",
        "fairpca_dist.flows.pipeline.pipeline",
        "flow",
        lambda inp, out: flow_pipeline(csv(inp / "nan.csv", with_value(frame(), "a", 5, np.nan)), out),
        InputError,
        r"1 row\(s\) have bad values \(per column: 'a': 1\); a sample is in \S*run/table\.rejects\.csv",
        allowed=("run", "run/table.rejects.csv"),
    ),
    Case(
        "flow-pipeline-text-in-one-file",
        "one Parquet file of three stores feature 'b' as text",
        "fairpca_dist.flows.pipeline.pipeline",
        "flow",
        lambda inp, out: flow_pipeline(
            _one_file_wrong(inp, lambda f: with_value(f, "b", 3, "x1").astype({"b": str})), out, features=FEATURES
        ),
        SchemaError,
        r"feature column 'b' in partition 1 \(file \S*part-1\.parquet\) has 1 value\(s\) that are not "
        r"numbers \(first: 'x1'\)",
    ),
    Case(
        "flow-fit-option-wrong-type",
        "options={'tol': 'abc'}",
        "fairpca_dist.flows.fit.fit",
        "flow",
        lambda inp, out: _fit_flow(inp, out, options={"tol": "abc"}),
        InputError,
        r"tol must be a positive number, got 'abc'",
    ),
    Case(
        "flow-project-edited-model",
        "model.npz components with 2 rows for 3 features",
        "fairpca_dist.flows.project.project",
        "flow",
        lambda inp, out: _project_flow(inp, out),
        InputError,
        r"components has shape \(2, 2\), but model\.json lists 3 feature\(s\)",
    ),
]


def _unicode_pipeline(inp: Path, out: Path) -> Any:
    from fairpca_dist.fitting import fit_table as fit

    names = {"a": "ä col ", "b": " b"}
    source = parquet_folder(inp / "unicode", [frame().rename(columns=names)])
    ingest(source, inp, features=["ä col ", " b", "c"], key_columns=["id"])
    model = fit(inp / "table", inp / "model", n_components=2, cache_dir=inp / "cache")
    project(inp / "model", inp / "table" / "parts", out, pass_through=["id"])
    return model


def _fit_flow(inp: Path, out: Path, **params: Any) -> Any:
    from fairpca_dist.flows.fit import fit

    return fit(table_dir=str(ingested(inp)), model_dir=str(out / "model"), cache_dir=str(inp / "cache"), **params)


def _project_flow(inp: Path, out: Path) -> Any:
    from fairpca_dist.flows.project import project as project_flow

    model = edited_model(inp, edit_arrays=lambda a: a.update(components=a["components"][:2]))
    return project_flow(
        model_dir=str(model), table_dir=str(inp / "table"), out_dir=str(out / "projected"), pass_through=["id"]
    )
