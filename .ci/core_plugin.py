"""pytest plugin for the core-only legs of .ci/compat (``pytest -p core_plugin``, with .ci on
PYTHONPATH): a test, or a test module, that stops because a package of an optional extra is
missing is reported as skipped ("needs fairpca_dist[<extra>]") instead of failed. Everything
else fails as usual; the features of the core itself are checked by tests/test_extras.py with
the optional packages hidden, so this cannot hide a core feature that needs an extra."""

from __future__ import annotations

from typing import Any

import pytest

from fairpca_dist.exceptions import MissingDependencyError
from fairpca_dist.extras import EXTRAS

OPTIONAL = {module for modules in EXTRAS.values() for module in modules} | {"fastapi", "moto", "dask_ml"}


def _missing(excinfo: Any) -> str | None:
    """Why the exception means "an extra is missing", or None."""
    if excinfo is None:
        return None
    error = excinfo.value
    seen = 0
    while error is not None and seen < 10:  # also under pytest.raises/warns, which chain the error
        if isinstance(error, MissingDependencyError):
            return str(error)
        if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] in OPTIONAL:
            return f"needs {error.name}, from an extra"
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    reason = _missing(call.excinfo) if report.failed else None
    if reason:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
        if hasattr(report, "wasxfail"):
            del report.wasxfail


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        text = str(report.longrepr)
        optional = any(f"No module named '{name}" in text for name in OPTIONAL)
        if "MissingDependencyError" in text or optional:
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0, "Skipped: the module needs an optional extra")
            report.result = []
