"""An mkdocs hook: the command-line page shows the ``--help`` of the installed ``fairpca``.

A line ``<!-- fairpca-help: fit -->`` (or ``<!-- fairpca-help: -->`` for ``fairpca`` itself)
becomes a text block of ``fairpca fit --help`` at 100 columns, so the page cannot fall behind
the code."""

from __future__ import annotations

import contextlib
import io
import os
import re
from typing import Any

MARKER = re.compile(r"^<!-- fairpca-help: ?([\w-]*) -->$", re.M)


def command_help(command: str) -> str:
    """The help text of ``fairpca COMMAND --help`` (of ``fairpca --help`` for "")."""
    from fairpca_dist.cli import main

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
            main([command, "--help"] if command else ["--help"])
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    if not text.getvalue().startswith("usage: fairpca"):
        raise RuntimeError(f"fairpca {command} --help printed no usage: {text.getvalue()[:200]!r}")
    return text.getvalue().rstrip()


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return MARKER.sub(lambda match: "```text\n" + command_help(match.group(1)) + "\n```", markdown)
