"""A small document model and its two renderers, shared by every report the library writes.

A report is a list of blocks (:class:`Heading`, :class:`Paragraph`, :class:`Table`,
:class:`Image`) built from numbers that were computed before; :func:`markdown` and
:func:`html_page` render the same blocks, so the Markdown and the HTML of a report always show
the same content (the HTML self-contained, its PNGs inlined). Nothing here computes.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Heading", "Paragraph", "Table", "Image", "Block", "number", "markdown", "html_page"]


@dataclass(frozen=True)
class Heading:
    """A section title of ``level`` 1 (the document's), 2, …"""

    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    """Plain text (escaped in HTML)."""

    text: str


@dataclass(frozen=True)
class Table:
    """A header and rows of already formatted cells."""

    header: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Image:
    """The PNG ``name``.png written beside the document, with a caption."""

    name: str
    caption: str


Block = Heading | Paragraph | Table | Image


def number(value: Any) -> str:
    """A table cell for a number: 4 significant digits, "n/a" for None (a non-finite value)."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def markdown(blocks: Sequence[Block]) -> str:
    """The blocks as Markdown (images referenced as ``name.png``)."""
    lines: list[str] = []
    for block in blocks:
        match block:
            case Heading(level, text):
                lines.append(f"{'#' * level} {text}")
            case Paragraph(text):
                lines.append(text)
            case Table(header, rows):
                lines.extend(
                    [_markdown_row(header), _markdown_row(["---"] * len(header)), *(_markdown_row(row) for row in rows)]
                )
            case Image(name, caption):
                lines.append(f"![{caption}]({name}.png)")
        lines.append("")
    return "\n".join(lines)


_HTML_STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #bbb;padding:.2em .6em;text-align:right}"
    "th:first-child,td:first-child{text-align:left}img{max-width:100%}"
)


def html_page(blocks: Sequence[Block], images: Mapping[str, bytes], title: str) -> str:
    """A self-contained page: the same blocks as the Markdown, PNGs inlined as base64."""
    escape = html.escape
    body: list[str] = []
    for block in blocks:
        match block:
            case Heading(level, text):
                body.append(f"<h{level}>{escape(text)}</h{level}>")
            case Paragraph(text):
                body.append(f"<p>{escape(text)}</p>")
            case Table(header, rows):
                head = "".join(f"<th>{escape(cell)}</th>" for cell in header)
                cells = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>")
            case Image(name, caption):
                data = base64.b64encode(images[name]).decode("ascii")
                body.append(
                    f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{escape(caption)}</figcaption></figure>"
                )
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
        f"<style>{_HTML_STYLE}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )
