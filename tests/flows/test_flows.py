"""The Prefect flows end to end, against the library called directly."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import CREDIT_CSV, require_data

from fairpca_dist import InputError, compute_moments, fit_projection, load_model, projection
from fairpca_dist.flows import project as project_flow_module
from fairpca_dist.flows.pipeline import pipeline
from fairpca_dist.flows.tasks import project_task
from fairpca_dist.io.ingest import table_source

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def credit_csv(tmp_path_factory) -> Path:
    frame = pd.read_csv(require_data(CREDIT_CSV), header=1)
    frame["education"] = np.where(frame["EDUCATION"].isin([1, 2]), "high", "low")
    frame = frame.rename(columns={"default payment next month": "default"}).drop(columns="EDUCATION")
    path = tmp_path_factory.mktemp("credit") / "credit.csv"
    frame.to_csv(path, index=False)
    return path


def test_pipeline_on_credit_agrees_with_the_library(credit_csv, tmp_path):
    state = pipeline(
        source=str(credit_csv),
        sensitive_feature=["education"],
        runs_dir=str(tmp_path),
        run_id="credit",
        key_columns=["ID"],
        target="default",
        method="fair-eig",
        n_components=3,
        read_options={"blocksize": 1_000_000},
        return_state=True,
    )
    result = state.result()
    run = tmp_path / "credit"
    assert result["run_dir"] == str(run)
    assert _steps_recorded(state.state_details.flow_run_id) == [
        "ingest-table",
        "fit-model",
        "project-table",
        "fairness-report",
    ]
    for path in [
        "table/schema.json",
        "model/model.json",
        "model/moments.npz",
        "projected/_SUCCESS",
        "report/report.json",
        "report/report.md",
        "report/report.html",
        "report/loss_vs_components.png",
    ]:
        assert (run / path).is_file(), path
    frame = pd.read_csv(credit_csv)
    features = [c for c in frame.columns if c not in ("ID", "education", "default")]
    direct = fit_projection(
        compute_moments(frame, sensitive_feature="education", features=features), 3, method="fair-eig", standardize=True
    )
    model = load_model(run / "model")
    np.testing.assert_allclose(model.components, direct.components, atol=1e-8)
    np.testing.assert_allclose(model.group_loss, direct.group_loss, rtol=1e-8)
    projected = pd.read_parquet(run / "projected").sort_values("ID")
    assert len(projected) == 30000 and list(projected.columns) == ["ID", "default", "fairpca0", "fairpca1", "fairpca2"]
    np.testing.assert_allclose(
        projected[["fairpca0", "fairpca1", "fairpca2"]].to_numpy(),
        direct.transform(frame.sort_values("ID")[features].to_numpy()),
        atol=1e-8,
    )
    report = json.loads((run / "report" / "report.json").read_text())
    assert report["model"]["method"] == "fair-eig"
    assert 0 <= report["downstream"]["models"]["fair"]["demographic_parity_difference"] <= 1


def _steps_recorded(flow_run_id: Any) -> list[str]:
    """The names of the task runs of a flow run, in order, checked to be completed and to have
    no flow run nested under them (the steps are the pipeline's own tasks)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.client.schemas.sorting import TaskRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id={"any_": [flow_run_id]}), sort=TaskRunSort.EXPECTED_START_TIME_ASC
        )
        nested = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))
        )
    assert nested == [] and all(run.state.is_completed() for run in runs)
    return [run.name.rsplit("-", 1)[0] for run in runs]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"source": "/no/such/table.csv"}, "does not exist"),
        ({"method": "fairest"}, "unknown method 'fairest'"),
        ({"n_components": 0}, "n_components must be a positive integer"),
        ({"on_bad_rows": "ignore"}, "on_bad_rows='ignore'"),
        ({"options": {"tolerance": 1}}, "unknown option"),
    ],
)
def test_parameters_are_checked_before_any_data_is_read(credit_csv, tmp_path, change, message):
    parameters = {
        "source": str(credit_csv),
        "sensitive_feature": ["education"],
        "runs_dir": str(tmp_path),
        "run_id": "bad",
        **change,
    }
    with pytest.raises(InputError, match=message):
        pipeline(**parameters)
    assert not (tmp_path / "bad").exists()


def test_the_pipeline_on_another_task_runner_says_which_it_needs(credit_csv, tmp_path):
    from prefect.task_runners import ThreadPoolTaskRunner

    on_threads = pipeline.with_options(task_runner=ThreadPoolTaskRunner())
    with pytest.raises(InputError, match="run on a DriverTaskRunner .*, not on ThreadPoolTaskRunner"):
        on_threads(source=str(credit_csv), sensitive_feature=["education"], runs_dir=str(tmp_path), run_id="other")
    assert not (tmp_path / "other").exists()


def test_projection_failing_half_way_is_retried_to_identical_output(credit_csv, tmp_path, monkeypatch):
    from fairpca_dist.flows.fit import fit
    from fairpca_dist.flows.ingest import ingest
    from fairpca_dist.flows.project import project

    ingest(
        source=str(credit_csv),
        table_dir=str(tmp_path / "table"),
        sensitive_feature=["education"],
        key_columns=["ID"],
        read_options={"blocksize": 600_000},
    )
    fit(table_dir=str(tmp_path / "table"), model_dir=str(tmp_path / "model"), n_components=2)
    project(
        model_dir=str(tmp_path / "model"),
        table_dir=str(tmp_path / "table"),
        out_dir=str(tmp_path / "clean"),
        pass_through=["ID"],
    )
    real = projection._project_partition
    failures = []

    def fail_once_on_partition_2(part, partition, *args):
        if partition.index == 2 and not failures:
            failures.append(partition.index)
            raise ConnectionResetError("connection to the object store was reset")  # transient: retried
        return real(part, partition, *args)

    monkeypatch.setattr(projection, "_project_partition", fail_once_on_partition_2)
    monkeypatch.setattr(project_flow_module, "project_task", project_task.with_options(retry_delay_seconds=0))
    project(
        model_dir=str(tmp_path / "model"),
        table_dir=str(tmp_path / "table"),
        out_dir=str(tmp_path / "retried"),
        pass_through=["ID"],
    )
    assert failures == [2]
    clean = {p.name: p.read_bytes() for p in (tmp_path / "clean").iterdir()}
    assert {p.name: p.read_bytes() for p in (tmp_path / "retried").iterdir()} == clean
    assert len(list(Path(table_source(tmp_path / "table")).glob("*.parquet"))) >= 3


def test_demo_runs_the_pipeline_on_the_embedded_table(tmp_path, capsys):
    from fairpca_dist.cli import main

    assert main(["demo", "--runs-dir", str(tmp_path), "--run-id", "demo"]) == 0
    out = capsys.readouterr().out
    assert "fair-eig is judged by its own criterion: max group loss" in out
    assert f"report {tmp_path / 'demo' / 'report' / 'report.md'}" in out
    # One line as each step starts and one as it finishes, with its time, in order; then the
    # breakdown of where the time went.
    steps = ["dask", "ingest", "fit", "project", "report"]
    lines = [line.split() for line in out.splitlines() if line.startswith("  ") and line.split()[0] in steps]
    assert [(words[0], words[1]) for words in lines] == [
        (name, event) for name in steps for event in ("started", "done")
    ]
    assert all(float(words[3]) >= 0 and words[4].startswith("s") for words in lines if words[1] == "done")
    assert re.search(
        r"finished in [\d.]+ s: checks [\d.]+ s, imports [\d.]+ s, ahead [\d.]+ s, Prefect API [\d.]+ s, "
        r"dask [\d.]+ s, ingest [\d.]+ s, fit [\d.]+ s, project [\d.]+ s, report [\d.]+ s, Prefect runs [\d.]+ s",
        out,
    )
    report = json.loads((tmp_path / "demo" / "report" / "report.json").read_text())
    assert report["data"]["n_samples"] == 442 and report["model"]["method"] == "fair-eig"


def test_bad_column_fails_once_with_its_own_error_inside_dask(credit_csv, tmp_path):
    """Input errors raised in a task on the Dask runner reach the caller unchanged and are
    not retried (a retried run would take 35 s of retry delays)."""
    import time

    from fairpca_dist import SchemaError

    started = time.perf_counter()
    with pytest.raises(SchemaError, match="'NO_SUCH_COLUMN' not found"):
        pipeline(source=str(credit_csv), sensitive_feature=["NO_SUCH_COLUMN"], runs_dir=str(tmp_path), run_id="bad")
    assert time.perf_counter() - started < 30


def test_a_run_failing_after_ingest_leaves_no_run_folder(credit_csv, tmp_path):
    """fair-eig is refused at the fit step (three groups); the table the run had ingested goes
    with the run folder, which a later run with that run id then creates afresh."""
    frame = pd.read_csv(credit_csv)
    three = tmp_path / "three.csv"
    frame.assign(education=np.where(frame["SEX"] == 1, "male-" + frame["education"], "female")).to_csv(three)
    with pytest.raises(InputError, match="fair-eig solves two-group problems; the data have 3 groups"):
        pipeline(
            source=str(three),
            sensitive_feature=["education"],
            features=["LIMIT_BAL", "AGE", "BILL_AMT1"],
            runs_dir=str(tmp_path / "runs"),
            run_id="failed",
            method="fair-eig",
        )
    # nothing is left: the fit took the moments ingest had written into the table (which went
    # with the run folder), and computed none for the cache beside it
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == []


def test_a_target_the_report_cannot_use_fails_the_run_before_the_fit(credit_csv, tmp_path, monkeypatch):
    """The report's downstream check needs a binary target; the pipeline checks it right after
    ingest (one pass over that column) instead of after the fit and the projection."""
    from fairpca_dist.flows import tasks

    def fit_table(*args, **kwargs):
        raise InputError("the fit ran")  # an input error: not retried

    monkeypatch.setattr(tasks, "fit_table", fit_table)
    with pytest.raises(InputError, match=r"target 'EDUCATION_RAW' has \d+ class\(es\) .*needs a binary target"):
        pipeline(
            source=str(_with_raw_education(credit_csv, tmp_path)),
            sensitive_feature=["education"],
            features=["LIMIT_BAL", "AGE"],
            target="EDUCATION_RAW",
            runs_dir=str(tmp_path / "runs"),
            run_id="t",
        )
    assert not (tmp_path / "runs" / "t").exists()


def _with_raw_education(credit_csv: Path, tmp_path: Path) -> Path:
    frame = pd.read_csv(credit_csv)
    path = tmp_path / "with-raw.csv"
    frame.assign(EDUCATION_RAW=np.arange(len(frame)) % 4).to_csv(path, index=False)
    return path


def test_evaluate_flow_agrees_with_the_library(tmp_path):
    from conftest import grouped_data

    from fairpca_dist import HashCells
    from fairpca_dist.assessment.evaluation import evaluate as evaluate_cells
    from fairpca_dist.flows.evaluate import evaluate
    from fairpca_dist.io.ingest import ingest_table

    x, labels = grouped_data(n_rows=900, n_features=4, n_groups=2)
    frame = pd.DataFrame(x, columns=list("abcd")).assign(id=np.arange(900), sex=labels)
    ingest_table(frame, tmp_path / "table", sensitive_feature=["sex"], key_columns=["id"])
    methods = {"pca": None, "dro": {"lam": [0.0, 1.0], "alpha": 0.1}}  # None: the README's form
    result = evaluate(str(tmp_path / "table"), str(tmp_path / "out"), methods=methods, n_splits=3)
    cells = compute_moments(frame, sensitive_feature="sex", features=list("abcd"), cells=HashCells(("id",), n_cells=10))
    with pytest.warns(UserWarning):  # dro's Theorem 3.2 conditions fail at λ = 1 on these groups
        direct = evaluate_cells(cells, 3, methods, n_splits=3, standardize=True, random_state=0).summary()
    for method in ("pca", "dro"):
        for column in ("test_abdiff", "test_are", "train_abdiff", "train_are"):
            assert result["summary"][method][column] == pytest.approx(direct.loc[method, column], rel=1e-9)
    assert (tmp_path / "out" / "evaluation.md").is_file()


def test_evaluate_flow_checks_settings_before_the_pass(tmp_path):
    from fairpca_dist.flows.evaluate import evaluate
    from fairpca_dist.io.ingest import ingest_table

    frame = pd.DataFrame({"a": np.arange(40.0), "b": np.arange(40.0) ** 2, "id": np.arange(40), "g": [0, 1] * 20})
    ingest_table(frame, tmp_path / "table", sensitive_feature=["g"], key_columns=["id"])
    with pytest.raises(InputError, match="n_folds=3"):
        evaluate(str(tmp_path / "table"), str(tmp_path / "out"), methods=["pca"], train_fraction=0.2)
    assert not (tmp_path / "out").exists() and not (tmp_path / ".moments-cache").exists()


def test_compare_flow_agrees_with_the_library(tmp_path):
    from conftest import grouped_data

    from fairpca_dist.assessment.table_comparison import compare_table
    from fairpca_dist.flows.compare import compare
    from fairpca_dist.io.ingest import ingest_table

    x, labels = grouped_data(n_rows=600, n_features=4, n_groups=2)
    frame = pd.DataFrame(x, columns=list("abcd")).assign(id=np.arange(600), sex=labels)
    ingest_table(frame, tmp_path / "table", sensitive_feature=["sex"], key_columns=["id"])
    methods = {"pca": None, "kleindessner": {}, "mm-sparse": {"penalty": [0.01, 0.05]}}
    result = compare(str(tmp_path / "table"), str(tmp_path / "out"), n_components=[1, 2], methods=methods)
    direct = compare_table(tmp_path / "table", tmp_path / "direct", n_components=[1, 2], methods=methods)
    assert [f["label"] for f in result["fits"]] == [c.label for c in direct.candidates]
    flow_table = pd.read_csv(tmp_path / "out" / "comparison.csv")
    direct_table = pd.read_csv(tmp_path / "direct" / "comparison.csv")
    pd.testing.assert_frame_equal(flow_table.drop(columns="seconds"), direct_table.drop(columns="seconds"), rtol=1e-12)
    assert result["passes"]["cell moments"] == 0  # the flow's cell-moments task computed and cached them


def test_compare_flow_checks_settings_before_the_pass(tmp_path):
    from fairpca_dist.flows.compare import compare
    from fairpca_dist.io.ingest import ingest_table

    frame = pd.DataFrame({"a": np.arange(40.0), "b": np.arange(40.0) ** 2, "id": np.arange(40), "g": [0, 1] * 20})
    ingest_table(frame, tmp_path / "table", sensitive_feature=["g"], key_columns=["id"])
    with pytest.raises(InputError, match="unknown method"):
        compare(str(tmp_path / "table"), str(tmp_path / "out"), methods=["pca", "nope"])
    assert not (tmp_path / "out").exists() and not (tmp_path / ".moments-cache").exists()


def test_every_deployment_names_a_flow_and_its_parameters():
    import importlib
    import inspect

    import yaml

    document = yaml.safe_load((Path(__file__).parents[2] / "deploy" / "prefect.yaml").read_text())
    for deployment in document["deployments"]:
        module, _, name = deployment["entrypoint"].partition(":")
        flow = getattr(importlib.import_module(module.removesuffix(".py").replace("/", ".")), name)
        accepted = set(inspect.signature(flow.fn).parameters)
        unknown = set(deployment.get("parameters", {})) - accepted
        assert not unknown, (deployment["entrypoint"], unknown)
