"""What ``fairpca pipeline`` finds before it starts Prefect, and a run id used twice.

Bad input a look at the source's header and first rows can find (a missing column, a file
format it cannot tell, a sensitive feature that is a number of many values, a target that is not
binary) fails the command before Prefect's temporary server starts: run as a new user would, in
a subprocess with a new Prefect home, whose database the server would create on its start. When
those rows are the whole source, the fit's check of the groups and the report's of the target
are made on them exactly; on a part, only what it makes certain (or, for a number, near so). A
second run with the same run id is refused unless ``--overwrite``; with it, the new run replaces
the previous one only once it completes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import GroupError, InputError, SchemaError, params
from fairpca_dist.cli import main
from fairpca_dist.engine.moments import GroupMoments
from fairpca_dist.params import check_source_table

FEATURES = ["a", "b", "c", "d"]
ROWS = 500


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """500 people: 2 groups (sex), a number of 500 values (income), an age of 18 to 80 in whole years
    (most ages held by several people, some by one), a binary target (y), one of 5 classes (grade)
    and a binary one whose second class is in one row, the last (rare)."""
    x, labels = grouped_data(n_rows=ROWS, n_features=4, n_groups=2, seed=3)
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(x, columns=FEATURES).assign(
        id=np.arange(ROWS),
        sex=labels,
        income=np.exp(x[:, 0]),
        age=18 + np.minimum(rng.exponential(12, ROWS), 62).astype(int),
        y=rng.integers(0, 2, ROWS),
        grade=rng.integers(0, 5, ROWS),
        rare=(np.arange(ROWS) == ROWS - 1).astype(int),
    )
    ages = frame["age"].value_counts()
    assert 18 <= ages.index.min() and ages.index.max() <= 80 and len(ages) > 20 and 0 < 2 * (ages == 1).sum() < ROWS
    path = tmp_path_factory.mktemp("checks") / "people.csv"
    frame.to_csv(path, index=False)
    return path


def _new_user_env(home: Path) -> dict[str, str]:
    """This process's environment without any Prefect setting, and a Prefect home not yet made."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    return {**env, "PREFECT_HOME": str(home)}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--sensitive-feature": "gender"}, "sensitive feature column 'gender' not found in "),
        ({"--features": "a b weight"}, "feature column 'weight' not found in "),
        ({"source": "people.data"}, "cannot tell the format of "),
        ({"--sensitive-feature": "income"}, "sensitive feature 'income' in "),
        ({"--sensitive-feature": "age"}, "sensitive feature 'age' in "),
        ({"--target": "grade"}, "target 'grade' has 5 class(es) [0, 1, 2, 3, 4]; demographic parity needs a binary "),
    ],
    ids=["sensitive-feature", "feature", "format", "continuous-sensitive-feature", "age", "target"],
)
def test_bad_input_fails_before_prefect_starts(source, tmp_path, change, message):
    if change.get("source"):
        (tmp_path / change["source"]).write_bytes(source.read_bytes())
    arguments = {
        "source": str(tmp_path / change.get("source", "")) if "source" in change else str(source),
        "--sensitive-feature": "sex",
        "--key-columns": "id",
        "--runs-dir": str(tmp_path / "runs"),
        "--run-id": "first",
        **{k: v for k, v in change.items() if k != "source"},
    }
    command = [sys.executable, "-m", "fairpca_dist.cli", "pipeline", arguments.pop("source")]
    for option, value in arguments.items():
        command += [option, *value.split()]
    home = tmp_path / "prefect-home"
    completed = subprocess.run(
        command, env=_new_user_env(home), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.startswith(f"fairpca: error: {message}") and completed.stderr.count("\n") == 1
    # Prefect's server never started: it creates its database in the Prefect home on its start,
    # and the command says so before it starts it
    assert not (home / "prefect.db").exists()
    assert "prefect" not in completed.stdout.replace("fairpca pipeline", ""), completed.stdout
    assert not (tmp_path / "runs").exists()


def test_on_the_whole_source_the_checks_are_the_fits_and_the_reports(source, tmp_path):
    """500 rows in one partition: the sample is the whole source."""
    frame = pd.read_csv(source)
    with pytest.raises(GroupError) as refused:
        check_source_table(source, sensitive_feature="age", key_columns=["id"])
    with pytest.raises(GroupError) as fit:  # the check of the fit, on the same rows
        GroupMoments.from_arrays(frame[FEATURES].to_numpy(), frame["age"]).check_groups()
    assert str(refused.value) == f"sensitive feature 'age' in {source}: {fit.value}"
    assert "groups in all: a sensitive feature of many values (a number such as an age?)" in str(fit.value)

    check_source_table(source, sensitive_feature="sex", key_columns=["id"], target="y")
    with pytest.raises(InputError, match=r"^target 'rare': class 1 has 1 row\(s\); a stratified"):
        check_source_table(source, sensitive_feature="sex", key_columns=["id"], target="rare")

    # the rows ingest keeps: a group whose only row has no value in a feature is not one the fit sees;
    # a default feature without a value in any row is left out
    frame["y"] = 0
    frame["kind"] = np.where(np.arange(ROWS) % 2, "odd", "even")
    frame.loc[7, ["kind", "a"]] = ["seventh", np.nan]
    frame["empty"] = np.nan
    frame.to_csv(tmp_path / "kinds.csv", index=False)
    check_source_table(tmp_path / "kinds.csv", sensitive_feature="kind", key_columns=["id"], exclude=["y"])
    with pytest.raises(GroupError, match=r"seventh'?: 1 row\(s\)"):
        check_source_table(tmp_path / "kinds.csv", sensitive_feature="kind", key_columns=["id"], exclude=["a", "y"])
    # rows whose leaving out leaves one group: ingest's refusal, which names their bad values
    frame.loc[frame["kind"] != "even", "b"] = np.nan
    frame.to_csv(tmp_path / "odd.csv", index=False)
    check_source_table(tmp_path / "odd.csv", sensitive_feature="kind", key_columns=["id"], exclude=["a", "y"])


def test_on_part_of_the_source_a_number_and_what_is_certain_are_refused(source, tmp_path, monkeypatch):
    """The first 100 of 500 rows: a category with rare groups passes (the rest of the table may
    hold more of their rows), a number of many values does not; a target of more than 2 classes
    in those rows is refused, one of 1 class (so far) passes."""
    monkeypatch.setattr(params, "SAMPLE_ROWS", 100)
    frame = pd.read_csv(source)
    frame["letter"] = [chr(ord("a") + int(v)) for v in np.minimum(np.random.default_rng(0).exponential(8, ROWS), 25)]
    frame.to_csv(tmp_path / "letters.csv", index=False)
    first = frame["letter"].head(100).value_counts()
    assert len(first) > 20 and (first == 1).any()
    check_source_table(tmp_path / "letters.csv", sensitive_feature="letter", key_columns=["id"])
    check_source_table(source, sensitive_feature="age", key_columns=["id"])
    with pytest.raises(
        GroupError,
        match=r"^sensitive feature 'income' has 100 distinct values in the first 100 "
        r"rows of .*: a sensitive feature of many values .* needs binning",
    ):
        check_source_table(source, sensitive_feature="income", key_columns=["id"])
    check_source_table(source, sensitive_feature="sex", key_columns=["id"], target="rare")
    with pytest.raises(InputError, match=r"^target 'grade' has 5 class\(es\)"):
        check_source_table(source, sensitive_feature="sex", key_columns=["id"], target="grade")


def test_the_checks_are_those_ingest_makes(source, tmp_path):
    with pytest.raises(SchemaError, match="key column 'ID' not found in "):
        check_source_table(source, sensitive_feature="sex", key_columns=["ID"])
    for passed in ({"pass_through": ["label"]}, {"target": "label"}):  # the target is passed through
        with pytest.raises(SchemaError, match="column 'label' not found"):
            check_source_table(source, sensitive_feature="sex", **passed)
    with pytest.raises(InputError, match=r"read options .* are not accepted by the CSV reader"):
        check_source_table(source, sensitive_feature="sex", read_options={"seperator": ";"})


def test_an_array_is_refused_as_ingest_refuses_it():
    """An array with one label per row: ingest refuses it (no column names); the check did not
    say so but failed on the table's missing DataFrame (TypeError: 'NoneType' object is not
    subscriptable), found by mypy."""
    x = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(SchemaError, match="^ingest needs named columns: pass a DataFrame or a path, not an array$"):
        check_source_table(x, sensitive_feature=np.array(["a", "b"] * 10))


# ----------------------------------------------------------------------------- a run id used twice
@pytest.mark.usefixtures("prefect_harness")
def test_a_run_id_in_use_is_refused_and_overwrite_replaces_it_once_complete(source, tmp_path, capsys):
    from fairpca_dist.flows.pipeline import pipeline

    runs = tmp_path / "runs"
    settings = {
        "source": str(source),
        "sensitive_feature": ["sex"],
        "features": FEATURES,
        "key_columns": ["id"],
        "runs_dir": str(runs),
        "run_id": "r",
    }
    pipeline(**settings, method="pca")
    first = {p.name: p.read_bytes() for p in (runs / "r" / "model").iterdir()}

    # refused: by the command line before Prefect starts (one line naming the folder), and by the flow
    capsys.readouterr()
    assert (
        main(
            [
                "pipeline",
                str(source),
                "--sensitive-feature",
                "sex",
                "--key-columns",
                "id",
                "--runs-dir",
                str(runs),
                "--run-id",
                "r",
            ]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert (
        error.startswith(
            f"fairpca: error: run folder {runs / 'r'} holds a previous run (table, model, projected, report)"
        )
        and "--overwrite" in error
        and error.count("\n") == 1
    )
    with pytest.raises(InputError, match="holds a previous run"):
        pipeline(**settings, method="fair-eig")

    # a failed replacement (the fit refuses its options, after the ingest) leaves the previous run as it was
    with pytest.raises(InputError, match="max_iter"):
        pipeline(**settings, method="fair-eig", options={"max_iter": 0}, overwrite=True)
    assert {p.name: p.read_bytes() for p in (runs / "r" / "model").iterdir()} == first
    assert sorted(p.name for p in runs.iterdir()) == ["r"]  # the fit took the moments ingest wrote into the table

    result = pipeline(**settings, method="fair-eig", overwrite=True)
    assert result["run_dir"] == str(runs / "r") and result["model"]["model_dir"] == str(runs / "r" / "model")
    assert json.loads((runs / "r" / "model" / "model.json").read_text())["method"] == "fair-eig"
    assert json.loads((runs / "r" / "report" / "report.json").read_text())["model"]["method"] == "fair-eig"
    assert sorted(p.name for p in runs.iterdir()) == ["r"]  # no staging or previous folder left


@pytest.mark.usefixtures("prefect_harness")
def test_the_folder_of_a_run_to_replace_may_not_hold_its_source(source, tmp_path):
    from fairpca_dist.flows.pipeline import pipeline

    run = tmp_path / "runs" / "demo"
    (run / "model").mkdir(parents=True)
    own = run / "people.csv"
    own.write_bytes(source.read_bytes())
    with pytest.raises(InputError, match="contains the input"):
        pipeline(source=str(own), sensitive_feature=["sex"], runs_dir=str(run.parent), run_id="demo", overwrite=True)
    assert own.read_bytes() == source.read_bytes()
