"""A griffe extension for the site: the docstrings cite objects with Sphinx roles
(``:func:`~fairpca_dist.compute_moments```), which Markdown would show as they are; this shows
them as code (``compute_moments``: the last part with ``~``, else the whole path)."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|data|attr|mod|exc|obj|const|ref):`(~?)([^`<]+?)(?:\s*<([^>]+)>)?`")


def _code(match: re.Match[str]) -> str:
    tilde, target, explicit = match.groups()
    if explicit:  # :role:`text <target>` shows the text, as Sphinx does
        return f"`{target.strip()}`"
    target = target.strip()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx cross-reference role written as inline code.

    >>> plain_roles("see :func:`~fairpca_dist.compute_moments` and :class:`GroupMoments`")
    'see `compute_moments` and `GroupMoments`'
    """
    return ROLE.sub(_code, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
