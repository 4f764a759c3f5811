"""The bad-input campaign (issue 16): every case of tests/bad_inputs.py ends in an error naming
the culprit (or its documented handling) and leaves no partial output."""

from __future__ import annotations

import hashlib
import re
import warnings
from pathlib import Path

import pytest
from bad_inputs import CASES, Case

BAD_INPUT_PAGE = Path(__file__).parents[1] / "docs" / "pages" / "reference" / "bad-inputs.md"


def _snapshot(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with a digest of its bytes ("dir" for folders)."""
    return {
        str(path.relative_to(folder)): "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
    }


def _act(case: Case, inp: Path, out: Path, capsys: pytest.CaptureFixture[str]):
    if case.kind == "handled":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return case.act(inp, out)
    if case.kind in ("cli", "usage"):
        capsys.readouterr()
        if case.kind == "usage":
            with pytest.raises(SystemExit) as exit_info:
                case.act(inp, out)
            assert exit_info.value.code == 2
            err = capsys.readouterr().err
            assert "Traceback" not in err and re.search(case.pattern, err), err
            return None
        assert case.act(inp, out) == 2
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fairpca: error: "), err
        assert re.search(case.pattern, lines[0]), lines[0]
        return None
    with pytest.raises(case.error) as error_info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case.act(inp, out)
    assert type(error_info.value) is case.error, f"{type(error_info.value).__name__}: {error_info.value}"
    message = str(error_info.value)
    assert re.search(case.pattern, message), message
    return None


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest):
    if case.kind == "flow":
        request.getfixturevalue("prefect_harness")
    inp, out = tmp_path / "in", tmp_path / "out"
    out.mkdir()
    if case.setup:
        case.setup(inp, out)
    before = _snapshot(out)
    result = _act(case, inp, out, capsys)
    after = _snapshot(out)
    if case.kind == "handled":
        case.check(result, inp, out)
        leftovers = [p for p in after if any(part.startswith(".") for part in Path(p).parts)]
        assert not leftovers, leftovers
        return
    changed = {path for path in set(before) | set(after) if before.get(path) != after.get(path)}
    assert changed <= set(case.allowed), f"partial output left: {sorted(changed - set(case.allowed))}"


def test_the_campaign_covers_what_the_issue_lists():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)) >= 40
    assert {case.kind for case in CASES} == {"library", "cli", "usage", "flow", "handled"}
    for case in CASES:
        assert case.pattern and (case.kind == "handled") == (case.error is None) == (case.check is not None), case.id
    for entry in [
        "ingest_table (CSV)",
        "ingest_table (Parquet folder)",
        "ingest_table (DataFrame)",
        "compute_moments",
        "fit_projection",
        "FairPCA.fit",
        "FairPCA.transform",
        "fit_table",
        "project_table",
        "build_report",
        "fairpca ingest",
        "fairpca fit",
        "fairpca project",
        "fairpca report",
        "fairpca_dist.flows.pipeline.pipeline",
        "fairpca_dist.flows.fit.fit",
        "fairpca_dist.flows.project.project",
    ]:
        assert any(case.entry == entry or case.entry.startswith(entry) for case in CASES), entry


def test_every_case_is_in_the_documentation_table():
    """The documentation's table of bad inputs (docs/pages/reference/bad-inputs.md) lists every case, and no other."""
    text = BAD_INPUT_PAGE.read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in text.splitlines() if line.startswith("| `")}
    assert rows == {case.id for case in CASES}
