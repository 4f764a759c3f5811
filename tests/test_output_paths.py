"""Inputs are sacred: no writer may write over, into or around one of its inputs.

Every entry point (library function, CLI command, Prefect flow) is given an output that is
its input, contains it or lies inside it, directly, through a symbolic link and through
``..``; each must refuse with :class:`OutputPathError` naming both paths before anything is
written, and every input must be byte-identical afterwards (hashed). Outputs of the wrong
kind (an existing file where a folder goes) and folders a step did not write are refused too.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import grouped_data

from fairpca_dist import InputError, OutputPathError
from fairpca_dist.assessment.table_comparison import compare_table
from fairpca_dist.assessment.table_evaluation import evaluate_table
from fairpca_dist.cli import main
from fairpca_dist.fitting import fit_table, write_table_report
from fairpca_dist.io.atomic import atomic_directory, atomic_file, check_output, output_lock
from fairpca_dist.io.ingest import ingest_table
from fairpca_dist.io.model_io import save_model
from fairpca_dist.projection import project_table


def tree_digest(root: Path) -> str:
    """SHA-256 over every file and link under ``root`` (names and bytes), or of ``root`` itself."""
    digest = hashlib.sha256()
    paths = [root] if root.is_file() else sorted(root.rglob("*"))
    for path in paths:
        digest.update(str(path.relative_to(root.parent)).encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict[str, Path]:
    """A Parquet source folder, its ingested table and a fitted model."""
    root = tmp_path_factory.mktemp("paths")
    x, labels = grouped_data(n_rows=300, n_features=3, n_groups=2)
    source = root / "source"
    source.mkdir()
    frame = pd.DataFrame(x, columns=list("abc")).assign(id=np.arange(300), sex=labels, y=np.arange(300) % 2)
    frame.iloc[:150].to_parquet(source / "one.parquet", index=False)
    frame.iloc[150:].to_parquet(source / "two.parquet", index=False)
    table, model = root / "table", root / "model"
    ingest_table(str(source), table, sensitive_feature="sex", key_columns=["id"], pass_through=["y"])
    fit_table(table, model, method="fair-eig", n_components=2)
    (root / "elsewhere").mkdir()
    os.symlink(source, root / "link-to-source")
    os.symlink(table, root / "link-to-table")
    return {"root": root, "source": source, "table": table, "model": model}


_OTHER_ROLES = {"sensitive_feature": "sex", "features": ["a", "b"]}
"""Column roles of the workspace's table whose moments ingest did not compute."""


def _outputs(workspace: dict[str, Path], name: str) -> list[tuple[str, str]]:
    """(description, output path) overlapping input ``name``: the input itself, a folder
    inside it, its parent folder, and the same through a symbolic link and through ``..``."""
    root, target = workspace["root"], workspace[name]
    link = root / f"link-to-{name}"
    outputs = [
        ("is", str(target)),
        ("inside", str(target / "out")),
        ("contains", str(root)),
        ("via ..", str(root / "elsewhere" / ".." / name)),
        ("via .. inside", f"{root}/elsewhere/../{name}/sub"),
    ]
    if link.exists():
        outputs += [("via link", str(link)), ("via link inside", str(link / "out"))]
    return outputs


def _refused(workspace: dict[str, Path], act: Callable[[], object], output: str, *inputs: str) -> None:
    before = {name: tree_digest(workspace[name]) for name in ("source", "table", "model")}
    listing = sorted(p.name for p in workspace["root"].iterdir())
    with pytest.raises(OutputPathError, match="writing it would destroy the input") as error:
        act()
    named = [i for i in inputs if str(i) in str(error.value)]
    contains = "contains the input" in str(error.value)  # a parent of several inputs: any of them
    assert named or contains, str(error.value)
    assert {name: tree_digest(workspace[name]) for name in before} == before
    assert sorted(p.name for p in workspace["root"].iterdir()) == listing  # no lock, staging, nothing
    assert not Path(output).exists() or Path(output).resolve() in {workspace[n].resolve() for n in before} | {
        workspace["root"].resolve()
    }


@pytest.mark.parametrize("case", range(7))
def test_ingest_refuses_an_output_overlapping_its_source(workspace, case):
    outputs = _outputs(workspace, "source")
    if case >= len(outputs):
        pytest.skip("no such case")
    _, output = outputs[case]
    _refused(
        workspace,
        lambda: ingest_table(str(workspace["source"]), output, sensitive_feature="sex"),
        output,
        str(workspace["source"]),
    )


@pytest.mark.parametrize("case", range(7))
def test_project_refuses_an_output_overlapping_its_table_or_model(workspace, case):
    for name in ("table", "model"):
        outputs = _outputs(workspace, name)
        if case >= len(outputs):
            continue
        _, output = outputs[case]
        _refused(
            workspace,
            lambda output=output: project_table(workspace["model"], workspace["table"], output),
            output,
            str(workspace[name]),
        )


@pytest.mark.parametrize("name", ["table", "model"])
def test_fit_report_compare_evaluate_refuse_outputs_overlapping_their_inputs(workspace, name):
    table, model = workspace["table"], workspace["model"]
    for _, output in _outputs(workspace, name):
        if name == "table":
            _refused(
                workspace,
                lambda output=output: fit_table(table, output, method="pca", n_components=1),
                output,
                str(table),
            )
            _refused(
                workspace,
                lambda output=output: compare_table(table, output, n_components=1, methods=["pca"]),
                output,
                str(table),
            )
            _refused(
                workspace,
                lambda output=output: evaluate_table(table, output, ["pca"], n_components=1),
                output,
                str(table),
            )
        _refused(
            workspace, lambda output=output: write_table_report(model, table, output), output, str(workspace[name])
        )


def test_the_moments_cache_may_not_lie_in_the_table(workspace):
    """A fit that computes moments (of roles other than the ingested table's) refuses to cache them
    inside the table."""
    table = workspace["table"]
    out = workspace["root"] / "model-2"
    _refused(
        workspace,
        lambda: fit_table(  # roles whose moments ingest did not write into the table: they would be cached
            table, out, method="pca", n_components=1, cache_dir=table / "cache", **_OTHER_ROLES
        ),
        str(table / "cache"),
        str(table),
    )


def test_cli_refuses_overlaps_with_one_line_and_exit_2(workspace, capsys):
    source, table, model, root = (workspace[n] for n in ("source", "table", "model", "root"))
    commands = [
        ["ingest", str(source), str(source), "--sensitive-feature", "sex"],
        ["ingest", str(source), f"{root}/elsewhere/../source/table", "--sensitive-feature", "sex"],
        ["project", str(model), str(table), str(table)],
        ["project", str(model), str(table), str(table / "parts")],
        ["project", str(model), str(table), str(model)],
        ["project", str(model), str(table), str(root / "link-to-table" / "parts")],
        ["fit", str(table), str(table)],
        ["report", str(model), str(table), str(model)],
        ["compare", str(table), str(table / "comparison"), "--method", "pca"],
        ["evaluate", str(table), str(root), "--method", "pca"],
    ]
    before = {name: tree_digest(workspace[name]) for name in ("source", "table", "model")}
    for command in commands:
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("fairpca: error: output "), err
        assert "writing it would destroy the input" in err and "Traceback" not in err
    assert {name: tree_digest(workspace[name]) for name in before} == before


def test_pipeline_refuses_a_run_folder_that_is_its_source(workspace, capsys):
    source, root = workspace["source"], workspace["root"]
    before = tree_digest(source)
    code = main(["pipeline", str(source), "--sensitive-feature", "sex", "--runs-dir", str(root), "--run-id", "source"])
    assert code == 2
    err = capsys.readouterr().err
    assert "fairpca: error: output" in err and str(source) in err and "Traceback" not in err
    assert tree_digest(source) == before and not (source / "table").exists()


@pytest.mark.usefixtures("prefect_harness")
def test_flows_refuse_overlaps_before_writing(workspace):
    from fairpca_dist.flows.ingest import ingest
    from fairpca_dist.flows.pipeline import pipeline
    from fairpca_dist.flows.project import project

    source, table, model, root = (workspace[n] for n in ("source", "table", "model", "root"))
    _refused(workspace, lambda: ingest(str(source), str(source / "table"), ["sex"]), str(source / "table"), str(source))
    _refused(workspace, lambda: project(str(model), str(table), str(table)), str(table), str(table))
    _refused(
        workspace,
        lambda: pipeline(str(source), ["sex"], runs_dir=str(source / ".."), run_id="source"),
        str(source),
        str(source),
    )


def test_an_existing_file_is_never_replaced_by_a_folder(workspace, tmp_path, capsys):
    victim = tmp_path / "notes.txt"
    victim.write_text("mine")
    with pytest.raises(OutputPathError, match="is an existing file, where a folder is to be written"):
        project_table(workspace["model"], workspace["table"], victim)
    assert main(["ingest", str(workspace["source"]), str(victim), "--sensitive-feature", "sex"]) == 2
    assert "is an existing file" in capsys.readouterr().err
    assert victim.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(OutputPathError, match="is an existing folder, where a file is to be written"):
        with atomic_file(folder, inputs=()):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "notes.txt"]


def test_a_folder_a_step_did_not_write_is_never_replaced(workspace, tmp_path):
    mine = tmp_path / "photos"
    mine.mkdir()
    (mine / "cat.jpg").write_bytes(b"\xff\xd8")
    before = tree_digest(mine)
    with pytest.raises(OutputPathError, match="no _SUCCESS: not an output this step wrote before"):
        project_table(workspace["model"], workspace["table"], mine)
    with pytest.raises(OutputPathError, match="no schema.json"):
        ingest_table(str(workspace["source"]), mine, sensitive_feature="sex")
    assert tree_digest(mine) == before and sorted(p.name for p in tmp_path.iterdir()) == ["photos"]
    # an empty folder, and a previous output of the same step, are replaced
    (tmp_path / "empty").mkdir()
    project_table(workspace["model"], workspace["table"], tmp_path / "empty")
    project_table(workspace["model"], workspace["table"], tmp_path / "empty")
    assert (tmp_path / "empty" / "_SUCCESS").is_file()


def test_a_swap_leaves_no_previous_copy_behind(tmp_path):
    target = tmp_path / "out"
    for text in ("one", "two"):
        with atomic_directory(target, inputs=(), marker="data") as staging:
            (staging / "data").write_text(text)
    assert (target / "data").read_text() == "two" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_check_output_relations(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "f.csv").write_text("x")
    for output, relation in [(tmp_path / "a", "is"), (tmp_path, "contains"), (tmp_path / "a" / "b", "lies inside")]:
        with pytest.raises(OutputPathError, match=f"{relation} the input"):
            check_output(output, [tmp_path / "a"], kind="folder")
    with pytest.raises(OutputPathError, match="contains the input"):  # a glob stands for its files
        check_output(tmp_path / "a", [str(tmp_path / "a" / "*.csv")], kind="folder")
    check_output(tmp_path / "a" / "out", [str(tmp_path / "a" / "*.csv")], kind="folder")  # beside them: allowed
    check_output(tmp_path / "ab", [tmp_path / "a"], kind="folder")  # a prefix of the name is not a parent
    check_output("memory://bucket/out", ["memory://bucket/in"], kind="folder")  # URLs: compared as given
    with pytest.raises(OutputPathError, match="lies inside"):
        check_output("memory://bucket/in/out", ["memory://bucket/in/"], kind="folder")
    with pytest.raises(OutputPathError, match="lies inside"):  # refused before the store is asked anything
        check_output("s3://bucket/in/out", ["s3://bucket/in/"], kind="folder")
    with pytest.raises(OutputPathError):
        with output_lock(tmp_path / "a" / "b", inputs=[tmp_path / "a"]):
            pass
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b", "f.csv"]


def test_save_model_refuses_its_inputs(workspace, tmp_path):
    from fairpca_dist import load_model

    model = load_model(workspace["model"])
    with pytest.raises(OutputPathError):
        save_model(model, workspace["table"] / "model", inputs=[workspace["table"]])
    assert not (workspace["table"] / "model").exists()


def test_a_failed_ingest_never_writes_its_sample_over_the_source(workspace, tmp_path):
    bad = pd.read_parquet(workspace["source"]).assign(a=lambda f: f["a"].where(f.index != 4))
    bad.to_csv(tmp_path / "out.rejects.csv", index=False)  # the source has the sample's name
    (tmp_path / "bad.csv").write_bytes((tmp_path / "out.rejects.csv").read_bytes())
    (tmp_path / "out2.rejects.csv").symlink_to(tmp_path / "bad.csv")  # the sample's name leads to the source
    os.link(tmp_path / "bad.csv", tmp_path / "out3.rejects.csv")  # a hard link of it
    before = tree_digest(tmp_path / "bad.csv")
    for source, out in [("out.rejects.csv", "out"), ("bad.csv", "out2"), ("bad.csv", "out3")]:
        with pytest.raises(InputError, match="1 row.s. have bad values") as error:
            ingest_table(str(tmp_path / source), tmp_path / out, sensitive_feature="sex")
        assert ("no sample of them was written" in str(error.value)) == (out != "out3"), str(error.value)
    assert tree_digest(tmp_path / "bad.csv") == before
    assert (tmp_path / "out.rejects.csv").read_bytes() == (tmp_path / "bad.csv").read_bytes()
    assert len(pd.read_csv(tmp_path / "out3.rejects.csv")) == 1  # the link was replaced, not written through


def test_fit_and_report_write_only_into_their_own_folders(workspace, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "model.txt").write_text("notes")
    with pytest.raises(OutputPathError, match="no model.json"):
        fit_table(workspace["table"], mine, method="pca", n_components=1)
    with pytest.raises(OutputPathError, match="no report.json"):
        write_table_report(workspace["model"], workspace["table"], mine, rbf_mmd="none", max_components=2)
    assert sorted(p.name for p in mine.iterdir()) == ["model.txt"] and sorted(p.name for p in tmp_path.iterdir()) == [
        "mine"
    ]


def test_a_failed_refit_leaves_the_previous_model_whole(workspace, tmp_path):
    model = tmp_path / "model"
    fit_table(workspace["table"], model, method="pca", n_components=1)
    before = tree_digest(model)
    with pytest.raises(InputError, match="n_components=7"):  # fails after the pass, inside the write
        fit_table(workspace["table"], model, method="pca", n_components=7)
    assert tree_digest(model) == before and sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_leftovers_are_recognised_by_their_suffix_not_by_their_prefix(workspace, tmp_path):
    backup = tmp_path / ".p.previous-mybackup"
    backup.mkdir()
    (backup / "thesis.txt").write_text("mine")
    (tmp_path / ".p.staging-notes.txt").write_text("mine too")
    project_table(workspace["model"], workspace["table"], tmp_path / "p")
    assert (backup / "thesis.txt").read_text() == "mine" and (tmp_path / ".p.staging-notes.txt").is_file()
    assert (tmp_path / "p" / "_SUCCESS").is_file()


def test_an_output_symbolic_link_is_written_where_it_points(workspace, tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere" / "projected")  # dangling: its folder is made
    project_table(workspace["model"], workspace["table"], tmp_path / "link")
    project_table(workspace["model"], workspace["table"], tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "elsewhere" / "projected" / "_SUCCESS").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "link"]
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["projected"]


def test_a_pipe_as_source_is_refused_without_reading_it(tmp_path, capsys):
    os.mkfifo(tmp_path / "rows.csv")  # opening it would block until a writer comes
    assert main(["ingest", str(tmp_path / "rows.csv"), str(tmp_path / "t"), "--sensitive-feature", "sex"]) == 2
    assert "is not a regular file or a folder (a pipe" in capsys.readouterr().err


def test_a_damaged_schema_is_named(workspace, tmp_path):
    import shutil

    table = tmp_path / "table"
    shutil.copytree(workspace["table"], table)
    for text, what in [
        ("{oops", "Expecting property name"),
        ("[]", "it holds a list"),
        ('{"format_version": 1}', "its groups are malformed"),
    ]:
        (table / "schema.json").write_text(text)
        with pytest.raises(InputError, match=f"schema.json is damaged .*; ingest the table again: .*{what}"):
            fit_table(table, tmp_path / "m", method="pca", n_components=1)
