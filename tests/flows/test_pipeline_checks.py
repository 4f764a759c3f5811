"""What ``fairpca pipeline`` finds before it starts Prefect, and a run id used twice.

Bad input a look at the source's header and first rows can find (a missing column, a file
format it cannot tell, a sensitive feature that is a number of many values) fails the command
before Prefect's temporary server starts: run as a new user would, in a subprocess with a new
Prefect home, whose database the server would create on its start. A second run with the same
run id is refused unless ``--overwrite``; with it, the new run replaces the previous one only
once it completes.
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
from fairpca_dist import GroupError, InputError, SchemaError
from fairpca_dist.cli import main

FEATURES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    x, labels = grouped_data(n_rows=400, n_features=4, n_groups=2, seed=3)
    frame = pd.DataFrame(x, columns=FEATURES).assign(id=np.arange(400), sex=labels, income=np.exp(x[:, 0]))
    path = tmp_path_factory.mktemp("checks") / "people.csv"
    frame.to_csv(path, index=False)
    return path


def _new_user_env(home: Path) -> dict[str, str]:
    """This process's environment without any Prefect setting, and a Prefect home not yet made."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    return {**env, "PREFECT_HOME": str(home)}


@pytest.mark.parametrize("change, message", [
    ({"--sensitive-feature": "gender"}, "sensitive feature column 'gender' not found in "),
    ({"--features": "a b weight"}, "feature column 'weight' not found in "),
    ({"source": "people.data"}, "cannot tell the format of "),
    ({"--sensitive-feature": "income"}, "sensitive feature 'income' has 400 distinct values in the first 400 rows of "),
], ids=["sensitive-feature", "feature", "format", "continuous-sensitive-feature"])
def test_bad_input_fails_before_prefect_starts(source, tmp_path, change, message):
    if change.get("source"):
        (tmp_path / change["source"]).write_bytes(source.read_bytes())
    arguments = {"source": str(tmp_path / change.get("source", "")) if "source" in change else str(source),
                 "--sensitive-feature": "sex", "--key-columns": "id", "--runs-dir": str(tmp_path / "runs"),
                 "--run-id": "first", **{k: v for k, v in change.items() if k != "source"}}
    command = [sys.executable, "-m", "fairpca_dist.cli", "pipeline", arguments.pop("source")]
    for option, value in arguments.items():
        command += [option, *value.split()]
    home = tmp_path / "prefect-home"
    completed = subprocess.run(command, env=_new_user_env(home), cwd=tmp_path, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.startswith(f"fairpca: error: {message}") and completed.stderr.count("\n") == 1
    # Prefect's server never started: it creates its database in the Prefect home on its start,
    # and the command says so before it starts it
    assert not (home / "prefect.db").exists()
    assert "prefect" not in completed.stdout.replace("fairpca pipeline", ""), completed.stdout
    assert not (tmp_path / "runs").exists()


def test_a_sensitive_feature_of_many_groups_that_is_a_category_passes(source, tmp_path):
    """26 groups of ~15 rows, some of a row or two: a category, not a number."""
    from fairpca_dist.params import check_source_table

    frame = pd.read_csv(source)
    frame["letter"] = [chr(ord("a") + int(v)) for v in np.minimum(np.random.default_rng(0).exponential(8, 400), 25)]
    frame.to_csv(tmp_path / "letters.csv", index=False)
    assert frame["letter"].nunique() == 26 and (frame["letter"].value_counts() == 1).any()
    check_source_table(tmp_path / "letters.csv", sensitive_feature="letter", key_columns=["id"])
    with pytest.raises(GroupError, match=r"needs binning into groups first"):
        check_source_table(source, sensitive_feature="income", key_columns=["id"])


def test_the_checks_are_those_ingest_makes(source, tmp_path):
    from fairpca_dist.params import check_source_table

    with pytest.raises(SchemaError, match="key column 'ID' not found in "):
        check_source_table(source, sensitive_feature="sex", key_columns=["ID"])
    with pytest.raises(SchemaError, match="column 'y' not found"):  # the target, passed through
        check_source_table(source, sensitive_feature="sex", pass_through=["y"])
    with pytest.raises(InputError, match=r"read options .* are not accepted by the CSV reader"):
        check_source_table(source, sensitive_feature="sex", read_options={"seperator": ";"})


# ----------------------------------------------------------------------------- a run id used twice
@pytest.mark.usefixtures("prefect_harness")
def test_a_run_id_in_use_is_refused_and_overwrite_replaces_it_once_complete(source, tmp_path, capsys):
    from flows.pipeline import pipeline

    runs = tmp_path / "runs"
    settings = {"source": str(source), "sensitive_feature": ["sex"], "features": FEATURES, "key_columns": ["id"],
                "runs_dir": str(runs), "run_id": "r"}
    pipeline(**settings, method="pca")
    first = {p.name: p.read_bytes() for p in (runs / "r" / "model").iterdir()}

    # refused: by the command line before Prefect starts (one line naming the folder), and by the flow
    capsys.readouterr()
    assert main(["pipeline", str(source), "--sensitive-feature", "sex", "--key-columns", "id", "--runs-dir",
                 str(runs), "--run-id", "r"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"fairpca: error: run folder {runs / 'r'} holds a previous run (table, model, projected, "
                            "report)") and "--overwrite" in error and error.count("\n") == 1
    with pytest.raises(InputError, match="holds a previous run"):
        pipeline(**settings, method="fair-eig")

    # a failed replacement (the fit refuses its options, after the ingest) leaves the previous run as it was
    with pytest.raises(InputError, match="max_iter"):
        pipeline(**settings, method="fair-eig", options={"max_iter": 0}, overwrite=True)
    assert {p.name: p.read_bytes() for p in (runs / "r" / "model").iterdir()} == first
    assert sorted(p.name for p in runs.iterdir()) == [".moments-cache", "r"]

    result = pipeline(**settings, method="fair-eig", overwrite=True)
    assert result["run_dir"] == str(runs / "r") and result["model"]["model_dir"] == str(runs / "r" / "model")
    assert json.loads((runs / "r" / "model" / "model.json").read_text())["method"] == "fair-eig"
    assert json.loads((runs / "r" / "report" / "report.json").read_text())["model"]["method"] == "fair-eig"
    assert sorted(p.name for p in runs.iterdir()) == [".moments-cache", "r"]  # no staging or previous folder left


@pytest.mark.usefixtures("prefect_harness")
def test_the_folder_of_a_run_to_replace_may_not_hold_its_source(source, tmp_path):
    from flows.pipeline import pipeline

    run = tmp_path / "runs" / "demo"
    (run / "model").mkdir(parents=True)
    own = run / "people.csv"
    own.write_bytes(source.read_bytes())
    with pytest.raises(InputError, match="contains the input"):
        pipeline(source=str(own), sensitive_feature=["sex"], runs_dir=str(run.parent), run_id="demo", overwrite=True)
    assert own.read_bytes() == source.read_bytes()
