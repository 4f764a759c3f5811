"""How the package installs and imports: one version, and no POSIX-only module at import
(Windows has no ``fcntl``)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap

HIDE_FCNTL = textwrap.dedent("""
    import importlib.abc, sys

    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "fcntl":
                raise ModuleNotFoundError("No module named 'fcntl'", name="fcntl")
            return None

    sys.modules.pop("fcntl", None)
    sys.meta_path.insert(0, Hide())
    import fairpca_dist, fairpca_dist.io.atomic, fairpca_dist.cli
    assert "fcntl" not in sys.modules
    print("imported")
""")


def test_the_package_imports_without_fcntl():
    completed = subprocess.run([sys.executable, "-c", HIDE_FCNTL], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "imported\n"


def test_the_version_has_one_source():
    import fairpca_dist

    assert importlib.metadata.version("fairpca_dist") == fairpca_dist.__version__
