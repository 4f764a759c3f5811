"""Prefect's defaults for this library are applied when a flow starts, not when it is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def _fresh_python(code: str, tmp_path) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter with no Prefect setting of the user's (a new Prefect home)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_flow_called_from_python_applies_the_defaults_and_importing_it_does_not(tmp_path):
    """Importing a flow changes no setting; calling it (here, up to Prefect's own ``Flow.__call__``,
    which would start the temporary server) applies PREFECT_DEFAULTS first."""
    result = _fresh_python(
        """
        import os
        import prefect
        from prefect.settings import get_current_settings

        from fairpca_dist.flows.pipeline import pipeline
        from fairpca_dist.flows.runtime import PREFECT_DEFAULTS

        def settings():
            current = get_current_settings()
            return current.server.ephemeral.startup_timeout_seconds, current.server.analytics_enabled

        print("imported", settings(), sorted(set(PREFECT_DEFAULTS) & set(os.environ)))
        prefect.Flow.__call__ = lambda self, *args, **kwargs: print("called", self.name, settings())
        pipeline("source.csv", sensitive_features="g")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["imported (20, True) []", "called fairpca-pipeline (180, False)"]


def test_a_setting_of_the_users_is_kept(tmp_path):
    result = _fresh_python(
        """
        import os
        os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "45"
        import prefect
        from prefect.settings import get_current_settings

        from fairpca_dist.flows.fit import fit

        prefect.Flow.__call__ = lambda self, *args, **kwargs: print(
            get_current_settings().server.ephemeral.startup_timeout_seconds
        )
        fit("table", "model")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["45"]


def test_the_tasks_keep_no_cache():
    """Every task writes its output to a path: no cache key is computed and no cached result
    can stand in for a run (Prefect's default policy hashed source and inputs, and looked it up)."""
    from prefect import Task
    from prefect.cache_policies import NO_CACHE

    from fairpca_dist.flows import tasks

    found = [value for value in vars(tasks).values() if isinstance(value, Task)]
    assert len(found) == 7
    assert all(task.cache_policy is NO_CACHE for task in found), [
        t.name for t in found if t.cache_policy is not NO_CACHE
    ]
