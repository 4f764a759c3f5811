"""The ``fairpca`` command: step subcommands mirror the flows; errors are one clean line."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist.cli import _Console, main
from fairpca_dist.solvers import SOLVERS


@pytest.fixture()
def source(tmp_path):
    x, labels = grouped_data(n_rows=600, n_features=4, n_groups=2)
    frame = pd.DataFrame(x, columns=list("abcd")).assign(id=np.arange(600), sex=labels, y=(x[:, 0] > 0).astype(int))
    frame.to_csv(tmp_path / "source.csv", index=False)
    return tmp_path / "source.csv"


def test_steps_write_the_pipeline_artifacts(source, tmp_path, capsys):
    t, m = tmp_path / "table", tmp_path / "model"
    assert (
        main(
            ["ingest", str(source), str(t), "--sensitive-feature", "sex", "--key-columns", "id", "--pass-through", "y"]
        )
        == 0
    )
    assert main(["fit", str(t), str(m), "--method", "samadi-mw", "--n-components", "2", "--option", "tol=1e-7"]) == 0
    assert json.loads((m / "model.json").read_text())["options"]["tol"] == 1e-7
    assert main(["project", str(m), str(t), str(tmp_path / "out"), "--pass-through", "id"]) == 0
    assert main(["report", str(m), str(t), str(tmp_path / "report"), "--target", "y"]) == 0
    out = capsys.readouterr().out
    assert "ingested 600 rows (0 rejected), 4 features (a, b, c, d), 2 groups by sex" in out
    assert "projected 600 rows" in out
    assert (tmp_path / "out" / "_SUCCESS").is_file() and (tmp_path / "report" / "report.html").is_file()
    assert list(pd.read_parquet(tmp_path / "out").columns) == ["id"] + [
        f"fairpca{j}" for j in range(pd.read_parquet(tmp_path / "out").shape[1] - 1)
    ]


def test_errors_are_one_clean_line(source, tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "fairpca_dist.cli",
            "ingest",
            str(source),
            str(tmp_path / "t"),
            "--sensitive-feature",
            "sx",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert re.match(
        r"fairpca: error: sensitive feature column 'sx' not found in '\S+source\.csv'; did you mean 'sex'",
        completed.stderr,
    )
    assert "Traceback" not in completed.stderr and not (tmp_path / "t").exists()


def test_a_feature_empty_in_every_row_is_left_out_and_named_or_if_listed_refused(source, tmp_path, capsys):
    # COMPAS's violent_recid is empty in all 7,214 rows: dropping bad rows would drop them all.
    pd.read_csv(source).assign(empty=np.nan).to_csv(source, index=False)
    args = ["ingest", str(source), str(tmp_path / "t"), "--sensitive-feature", "sex", "--key-columns", "id"]
    assert main(args) == 0
    assert "1 column left out of the features: 'empty' (all missing)" in capsys.readouterr().out
    schema = json.loads((tmp_path / "t" / "schema.json").read_text())
    assert schema["features"] == [*"abcd", "y"] and schema["dropped_columns"] == {"empty": "all missing"}
    assert main([*args, "--features", "a", "empty"]) == 2
    assert (
        "Feature(s) ['empty'] have no usable value in any row: leave them out (exclude=['empty']; "
        "command line: --exclude empty)"
    ) in capsys.readouterr().err


def test_bad_option_syntax(source, tmp_path, capsys):
    assert main(["ingest", str(source), str(tmp_path / "t"), "--sensitive-feature", "sex"]) == 0
    assert main(["fit", str(tmp_path / "t"), str(tmp_path / "m"), "--option", "tol"]) == 2
    assert "not of the form key=value" in capsys.readouterr().err


def test_evaluate_writes_the_protocol_and_reads_the_rows_once(source, tmp_path, capsys, monkeypatch):
    from fairpca_dist.assessment import table_evaluation
    from fairpca_dist.engine.cells import CellMoments

    t, out = tmp_path / "table", tmp_path / "evaluation"
    assert main(["ingest", str(source), str(t), "--sensitive-feature", "sex", "--key-columns", "id"]) == 0
    arguments = [
        "evaluate",
        str(t),
        str(out),
        "--method",
        "pca",
        "--method",
        "dro",
        "--grid",
        "dro:lam=0,1",
        "--option",
        "dro:alpha=0.1",
        "--option",
        "dro:algorithm=subgradient",
        "--option",
        "dro:n_restarts=2",
        "--option",
        "dro:n_iter=100",
        "--splits",
        "3",
    ]
    assert main(arguments) == 0
    captured = capsys.readouterr()
    assert "| dro |" in captured.out and "| pca |" in captured.out
    assert all(line.startswith("fairpca: warning: evaluate: ") for line in captured.err.splitlines()), captured.err
    document = json.loads((out / "evaluation.json").read_text())
    assert document["settings"]["methods"]["dro"] == {
        "fixed": {"alpha": 0.1, "algorithm": "subgradient", "n_restarts": 2, "n_iter": 100},
        "grid": [{"lam": 0}, {"lam": 1}],
    }
    assert {r["method"] for r in document["results"]} == {"pca", "dro"} and len(document["results"]) == 6
    assert all(r["fits"] == (7 if r["method"] == "dro" else 1) for r in document["results"])
    assert (out / "tradeoff.png").is_file() and len(pd.read_csv(out / "evaluation.csv")) == 6

    passes = []
    monkeypatch.setattr(table_evaluation, "compute_moments", lambda *a, **k: passes.append(1) or CellMoments.load(""))
    assert main([*arguments[:2], str(tmp_path / "again"), *arguments[3:]]) == 0  # cached cells: no pass
    assert passes == [] and (tmp_path / "again" / "evaluation.md").is_file()
    again = json.loads((tmp_path / "again" / "evaluation.json").read_text())

    def scores(results):
        return [(r["method"], r["params"], r["test"], r["train"]) for r in results]

    assert scores(again["results"]) == scores(document["results"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--method", "mm-robust"], "reads the rows at every iteration"),
        (["--train-fraction", "0.25"], "not a whole number of the 10 cells"),
        (["--grid", "pca:alpha=1,2"], "unknown option"),
        (["--grid", "dro=1"], "must be METHOD:KEY=VALUE"),
    ],
)
def test_evaluate_settings_fail_before_the_pass(source, tmp_path, capsys, extra, message):
    t = tmp_path / "table"
    assert main(["ingest", str(source), str(t), "--sensitive-feature", "sex", "--key-columns", "id"]) == 0
    assert main(["evaluate", str(t), str(tmp_path / "e"), "--method", "pca", *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "e").exists() and not (tmp_path / ".moments-cache").exists()


def test_compare_writes_the_comparison(source, tmp_path, capsys):
    t, out = tmp_path / "table", tmp_path / "comparison"
    assert (
        main(
            ["ingest", str(source), str(t), "--sensitive-feature", "sex", "--key-columns", "id", "--pass-through", "y"]
        )
        == 0
    )
    arguments = [
        "compare",
        str(t),
        str(out),
        "--method",
        "pca",
        "--method",
        "kleindessner",
        "--method",
        "mm-sparse",
        "--grid",
        "mm-sparse:penalty=0.01,0.05",
        "--n-components",
        "1-2",
        "--target",
        "y",
    ]
    assert main(arguments) == 0
    printed = capsys.readouterr().out
    assert "r = 1:" in printed and "r = 2:" in printed and "passes over the rows" in printed
    table = pd.read_csv(out / "comparison.csv")
    assert len(table) == 8 and set(table["n_components"]) == {1, 2}
    assert table["in_accuracy"].notna().all() and table["in_rbf_mmd2"].notna().all()
    assert (out / "group_error_vs_r.png").is_file() and (out / "comparison.html").is_file()
    with pytest.raises(SystemExit):
        main(["compare", str(t), str(tmp_path / "bad"), "--n-components", "0"])
    assert main(["compare", str(t), str(tmp_path / "bad"), "--method", "pca", "--grid", "dro:lam=0,1"]) == 2
    assert main(["compare", str(t), str(tmp_path / "bad"), "--n-components", "9"]) == 2
    assert not (tmp_path / "bad").exists()


def test_fit_and_report_mmd_on_a_table(source, tmp_path, capsys):
    """The RBF mmd method reads the ingested table at every evaluation; the report measures
    both arms' RBF-kernel MMD² over every row with the model's σ."""
    t, m, r = tmp_path / "table", tmp_path / "model", tmp_path / "report"
    assert main(["ingest", str(source), str(t), "--sensitive-feature", "sex", "--key-columns", "id"]) == 0
    assert (
        main(
            [
                "fit",
                str(t),
                str(m),
                "--method",
                "mmd",
                "--n-components",
                "1",
                "--option",
                "tau=0.01",
                "--option",
                "estimator=rff",
                "--option",
                "n_random_features=300",
            ]
        )
        == 0
    )
    saved = json.loads((m / "model.json").read_text())
    certificate = saved["diagnostics"]["certificate"]
    assert saved["options"]["estimator"] == "rff" and saved["diagnostics"]["status"] == "converged"
    assert certificate["mmd2"] <= 0.01 and certificate["n_evaluations"] > 1
    assert main(["report", str(m), str(t), str(r), "--max-components", "1", "--rbf-mmd", "exact"]) == 0
    report = json.loads((r / "report.json").read_text())
    assert report["rbf_mmd"]["estimator"] == "exact" and report["rbf_mmd"]["sigma"] == certificate["sigma"]
    assert report["rbf_mmd"]["fair"][0][1] < report["rbf_mmd"]["pca"][0][1]
    with pytest.raises(SystemExit):
        main(["report", str(m), str(t), str(r), "--rbf-mmd", "all-pairs"])
    assert "invalid choice: 'all-pairs'" in capsys.readouterr().err


def test_demo_refuses_a_negative_number_of_synthetic_rows_naming_the_option(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--synthetic-rows", "-5", "--runs-dir", str(tmp_path / "runs")])
    assert exit_info.value.code == 2
    assert (
        "argument --synthetic-rows: must be a number of rows, or 0 for the diabetes table; got -5"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "runs").exists()


def test_option_values_are_json_or_python_literals_else_text():
    from fairpca_dist.cli import _options

    given = [
        "a=None",
        "b=null",
        "c=True",
        "d=true",
        "e=1e-8",
        'f=["?"]',
        "g=['?', 'NA']",
        "h={'x': 1}",
        "i=SCS",
        "j=;",
        "k=1,2",
        "l='quoted'",
        "m=__import__('os').getcwd()",
        "n=(1, 2)",
        "o=",
    ]
    assert _options(given) == {
        "a": None,
        "b": None,
        "c": True,
        "d": True,
        "e": 1e-8,
        "f": ["?"],
        "g": ["?", "NA"],
        "h": {"x": 1},
        "i": "SCS",
        "j": ";",
        "k": "1,2",
        "l": "quoted",
        "m": "__import__('os').getcwd()",
        "n": "(1, 2)",
        "o": "",
    }


def test_read_option_header_none_reads_a_file_without_a_header_line(source, tmp_path, capsys):
    headerless = tmp_path / "headerless.csv"
    pd.read_csv(source).to_csv(headerless, index=False, header=False)  # a b c d id sex y: columns 0 … 6
    assert (
        main(
            [
                "ingest",
                str(headerless),
                str(tmp_path / "t"),
                "--sensitive-feature",
                "5",
                "--key-columns",
                "4",
                "--exclude",
                "6",
                "--read-option",
                "header=None",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "t" / "schema.json").read_text())["features"] == ["0", "1", "2", "3"]
    assert "ingested 600 rows" in capsys.readouterr().out


def test_the_read_option_help_shows_examples_that_work(capsys):
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--read-option header=None" in text and "--read-option na_values='[\"?\"]'" in text
    assert "header=1" not in text


def test_fit_says_why_the_projection_is_wider_than_asked(tmp_path, capsys):
    """samadi-sdp and samadi-mw return up to r + k - 1 columns where no rank-r projection is
    certified; the line says so, with the solver's reason. Three groups on lines 60° apart in
    the plane: at r = 1 the optimum needs the second column (tests/solvers/test_samadi_defaults)."""
    angles = np.pi * np.arange(3) / 3
    signs = np.tile([-1.0, 1.0], 20)
    rows = [(i, f"g{g}", t * np.cos(a), t * np.sin(a)) for g, a in enumerate(angles) for i, t in enumerate(signs)]
    source = tmp_path / "star.csv"
    pd.DataFrame(rows, columns=["id", "group", "x", "y"]).assign(id=lambda f: range(len(f))).to_csv(source, index=False)
    t = tmp_path / "table"
    assert main(["ingest", str(source), str(t), "--sensitive-feature", "group", "--key-columns", "id"]) == 0
    capsys.readouterr()
    assert main(["fit", str(t), str(tmp_path / "m"), "--method", "samadi-sdp", "--n-components", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(line) <= 100 for line in lines), out
    note = " ".join(out[out.index("note: ") :].split())  # the note's wrapped lines, the last of the output
    assert note.startswith(
        "note: the projection has 2 columns, not r=1: the best rank-1 projection found in "
        "the output's span has largest loss "
    )
    assert note.endswith("(Samadi et al. 2018, Theorem 5.2: rank ≤ r + k − 1 = 3)")
    assert out.count("not r=1") == 1  # said once: not again in the solver's message above it
    assert main(["fit", str(t), str(tmp_path / "m2"), "--method", "pca", "--n-components", "1"]) == 0
    assert "note:" not in capsys.readouterr().out


@pytest.fixture()
def intersectional_table(tmp_path):
    """12 intersectional groups (race × education), race=Black of a larger spread."""
    rng = np.random.default_rng(0)
    race = rng.choice(["White", "Black", "Amer-Indian-Eskimo"], 1_200)
    x = rng.normal(size=(1_200, 4)) * np.where(race == "Black", 1.5, 1.0)[:, None]
    frame = pd.DataFrame(x, columns=list("abcd")).assign(
        id=np.arange(1_200), race=race, education=rng.choice(["10th", "HS-grad", "Bachelors", "Masters"], 1_200)
    )
    frame.to_csv(tmp_path / "source.csv", index=False)
    assert (
        main(
            [
                "ingest",
                str(tmp_path / "source.csv"),
                str(tmp_path / "table"),
                "--sensitive-feature",
                "race",
                "education",
                "--key-columns",
                "id",
            ]
        )
        == 0
    )
    return tmp_path / "table"


def _fit_output(capsys, table, model_dir, *args):
    capsys.readouterr()
    assert main(["fit", str(table), str(model_dir), *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "method, options, headline, quantity",
    [
        ("samadi-mw", [], "max group loss (lower is fairer) = ", "group loss, largest first:"),
        (
            "dro",
            ["--option", "n_iter=50", "--option", "n_restarts=1"],
            "ABDiff (lower is fairer) = ",
            "group error, largest first:",
        ),
        ("pca", [], "explained variance (higher is better) = ", "group explained variance, smallest first:"),
    ],
)
def test_fit_names_the_methods_own_criterion_and_its_worst_groups_by_column(
    intersectional_table, tmp_path, capsys, method, options, headline, quantity
):
    """Each method by its own criterion (not Samadi's loss for all), its value as scoring gives it,
    the worst few of the 12 groups named by column on lines of their own, then how many more."""
    from fairpca_dist.assessment.scoring import score_projection
    from fairpca_dist.fitting import load_fitted

    out = _fit_output(capsys, intersectional_table, tmp_path / "m", "--method", method, "--n-components", "2", *options)
    lines = out.splitlines()
    model, moments = load_fitted(tmp_path / "m")
    key = SOLVERS[method].criterion_of(model.options)
    assert lines[0] == f"{method} r=2: {headline}{score_projection(model, moments).value(key):.4g}"
    assert lines[1] == f"  {quantity}" and "group losses" not in out and "('" not in out
    groups = [line.strip().split("  ")[0] for line in lines[2:] if line.startswith("    ") and "more" not in line]
    assert len(groups) == 5 and all(re.fullmatch(r"race=[\w-]+ & education=[\w-]+", g) for g in groups), out
    assert "    … and 7 more" in lines
    assert f"  {model.message}" in lines and lines[-1] == f"  model in {tmp_path / 'm'}"
    assert all(len(line) <= 100 for line in lines)


def test_fit_of_mmd_shows_its_pair_of_groups(source, tmp_path, capsys):
    t = tmp_path / "table"
    assert main(["ingest", str(source), str(t), "--sensitive-feature", "sex", "--key-columns", "id"]) == 0
    out = _fit_output(capsys, t, tmp_path / "m", "--method", "mmd", "--n-components", "1", "--option", "kernel=linear")
    assert out.startswith("mmd r=1: linear MMD² (lower is fairer) = ")
    assert re.search(r"^  largest pair: sex=g\d vs sex=g\d = ", out, re.M), out


def test_a_closed_output_ends_the_command_quietly():
    """``fairpca methods | head``: the reader is gone before the output is written; no traceback,
    the status of a command killed by a closed pipe."""
    for command in (["methods"], ["fit", "--help-method", "dro"]):
        child = subprocess.Popen(
            [sys.executable, "-m", "fairpca_dist.cli", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        child.stdout.close()  # no reader left: the child's writes fail with EPIPE
        error = child.stderr.read()
        assert child.wait(timeout=120) == 141 and error == "", error


def test_the_program_leaves_its_objects_to_the_exit_and_a_call_from_python_does_not():
    """Run as the program (no argv), main() freezes the objects made so far (the garbage collections
    at exit skip them); called with argv (from Python, a test), it leaves the collector alone."""
    code = (
        "import gc, io, sys, contextlib\n"
        "from fairpca_dist.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['methods'])\n"
        "print(gc.get_freeze_count())\n"
        "sys.argv = ['fairpca', 'methods']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main()\n"
        "print(gc.get_freeze_count() > 1000)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"]


def test_pipeline_passes_group_names_to_its_report(source, tmp_path, monkeypatch):
    """``--group-name`` of ``fairpca pipeline`` reaches the pipeline flow's ``group_names`` (which
    hands them to the report step), as ``fairpca report --group-name`` does; no Prefect here."""
    import fairpca_dist.flows.pipeline
    import fairpca_dist.flows.runtime
    from fairpca_dist.exceptions import FairPCAError

    given = {}

    class Server:
        waited = meanwhile = 0.0

        def __init__(self, meanwhile=()):  # ready(meanwhile): the work of the command is not done
            pass

        def describe(self):
            return "no server (test)"

    def pipeline(**parameters):
        given.update(parameters)
        raise FairPCAError("stopped by the test")

    monkeypatch.setattr(
        fairpca_dist.flows.runtime, "api_server", lambda announce, launched: contextlib.nullcontext(Server)
    )
    monkeypatch.setattr(fairpca_dist.flows.pipeline, "pipeline", pipeline)
    monkeypatch.setattr(_Console, "quiet_prefect", lambda self: None)
    assert (
        main(
            [
                "pipeline",
                str(source),
                "--sensitive-feature",
                "sex",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--group-name",
                "g0=first",
                "--group-name",
                "sex=g1=second",
            ]
        )
        == 2
    )
    assert given["group_names"] == {"g0": "first", "sex=g1": "second"}
    assert "group_names" in inspect.signature(fairpca_dist.flows.pipeline._steps).parameters


def test_the_collector_is_off_while_the_pipeline_command_imports_and_only_then():
    """Imported as the ``fairpca pipeline`` command, this module turns the garbage collector off
    (its imports make long-lived objects only) until _collect_from_now_on, which turns it back on
    with those objects frozen; imported by a program, or as another command, it leaves it alone."""
    code = (
        "import gc, sys\n"
        "sys.argv = sys.argv[1:]\n"
        "import fairpca_dist.cli as cli\n"
        "print(gc.isenabled())\n"
        "cli._collect_from_now_on()\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 1000)\n"
    )
    printed = {}
    for argv in (["fairpca", "pipeline"], ["fairpca", "methods"], ["a-program", "pipeline"]):
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        printed[argv[1] if argv[0] == "fairpca" else argv[0]] = done.stdout.split()
    assert printed == {
        "pipeline": ["False", "True", "True"],
        "methods": ["True", "True", "False"],
        "a-program": ["True", "True", "False"],
    }
