"""The ``fairpca`` command: one subcommand per pipeline step, the whole pipeline, and a demo.

``ingest``, ``fit``, ``project``, ``report``, ``evaluate`` and ``compare`` call the library functions the
Prefect flows call, with the same parameters and outputs; ``pipeline`` and ``demo`` run the Prefect
pipeline flow itself (an ephemeral Prefect server starts when ``PREFECT_API_URL`` is unset).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import gc
import inspect
import json
import logging
import math
import os
import re
import signal
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

_LOADING = time.perf_counter()  # the libraries the command needs, imported below: counted in its time


def _command_name() -> str | None:
    """The subcommand (``argv[1]``) when this module is the ``fairpca`` command (the console script,
    or ``python -m``), else None (a program or a test imports it)."""
    if __name__ != "__main__" and os.path.basename(sys.argv[0]) != "fairpca":
        return None
    return sys.argv[1] if len(sys.argv) > 1 else None


def _launch_demo_server() -> tuple[contextlib.ExitStack, TemporaryServer] | None:
    """``fairpca demo``'s temporary Prefect API server, launched as the command starts, before this
    module imports numpy, pandas, dask and the solvers below (1-2 s of the command that the
    server's own start, 4-6 s of a core, now overlaps too); with the exit stack that stops it,
    which the demo takes over (:func:`_demo`). None when this module is not the ``fairpca``
    command (a program or a test imports it), the command is not the demo or asks for its
    help, or no server is launched here (``PREFECT_API_URL`` is set, or the flows' packages are
    not installed: the demo launches its own, or says what is missing)."""
    if _command_name() != "demo" or {"-h", "--help"} & set(sys.argv[2:]):
        return None
    from fairpca_dist.exceptions import MissingDependencyError

    try:
        from fairpca_dist.flows.api_server import launched_early
    except MissingDependencyError:
        return None
    stack = contextlib.ExitStack()
    server = stack.enter_context(launched_early())
    return (stack, server) if server is not None else None


_DEMO_SERVER = [_launch_demo_server()]  # the demo takes it (_demo); main stops it if the command ends first

# Python's garbage collector is off while the demo and the pipeline import their libraries (this
# module's, Prefect's, the flows': hundreds of thousands of long-lived objects, none garbage): its
# collections during those imports were 0.6-0.8 s of their 4.5-5.5 s of CPU. _collect_from_now_on
# turns it back on before any data is read.
_GC_PAUSED = [_command_name() in ("demo", "pipeline") and gc.isenabled()]
if _GC_PAUSED[0]:
    gc.disable()


def _collect_from_now_on() -> None:
    """Turn the garbage collector back on if this module turned it off (``_GC_PAUSED``), with every
    object made so far (the libraries' modules, classes and schemas) frozen (:func:`gc.freeze`): the
    collections of the run do not traverse them again. Call it before rows are read or made: what
    is frozen is never collected (the imports leave next to no garbage)."""
    if _GC_PAUSED.pop() if _GC_PAUSED else False:
        gc.freeze()
        gc.enable()


import numpy as np  # noqa: E402

from fairpca_dist.assessment.scoring import (  # noqa: E402
    ProjectionScores,
    criterion_named,
    own_criterion,
    score_projection,
)
from fairpca_dist.engine.moments import GroupMoments  # noqa: E402
from fairpca_dist.exceptions import FairPCAError, InputError  # noqa: E402
from fairpca_dist.params import RBF_EXACT_MAX_ROWS, RBF_MMD_CHOICES, check_run_parameters  # noqa: E402
from fairpca_dist.solvers import CENTERS, SOLVERS, option_defaults  # noqa: E402
from fairpca_dist.solvers.result import FairProjection  # noqa: E402
from fairpca_dist.wording import group_display_names  # noqa: E402

_IMPORT_SECONDS = [time.perf_counter() - _LOADING]  # taken by the process's first command (_command)

if TYPE_CHECKING:
    from fairpca_dist.flows.api_server import TemporaryServer
    from fairpca_dist.flows.runtime import Ready

__all__ = ["main"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


_BYTE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def _byte_count(text: str) -> int:
    """``--moments-budget``: bytes, as a number with an optional unit (``2GB``, ``500MB``, ``3e9``)."""
    number = text.strip().upper().rstrip("BKMGT")
    unit = text.strip().upper()[len(number) :]
    try:
        value = float(number) * _BYTE_UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"must be a number of bytes such as 2GB, 500MB or 3e9, got {text!r}") from None
    if not math.isfinite(value) or value > 2**62:
        raise argparse.ArgumentTypeError(f"must be a finite number of bytes such as 2GB, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return int(value)


def _group_name(text: str) -> tuple[str, str]:
    """``[COLUMN=]VALUE=NAME`` of ``--group-name``: the key (a value, or ``column=value``) and its name."""
    key, sep, name = text.rpartition("=")
    if not sep or not key or not name:
        raise argparse.ArgumentTypeError(f"expected VALUE=NAME or COLUMN=VALUE=NAME (e.g. 1=female), got {text!r}")
    return key, name


def _synthetic_rows(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of rows, or 0 for the diabetes table; got {value}")
    return value


def _options(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs (solver, reader or storage options), each value read by :func:`_value`."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"option {pair!r} is not of the form key=value")
        options[key] = _value(value)
    return options


# What a Python literal on the command line may stand for; a bare ``1,2`` (a tuple to Python) stays text
_LITERAL_TYPES = (type(None), bool, int, float, str, list, dict)


def _value(text: str) -> Any:
    """A command-line value: JSON (``null``, ``true``, ``1e-8``, ``["?"]``) or a Python literal
    (``None``, ``True``, ``['?', 'NA']``) when it is one, else the text itself (``sep=;``,
    ``solver=SCS``). Python literals are read by :func:`ast.literal_eval`, which evaluates no
    code."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text
    return value if isinstance(value, _LITERAL_TYPES) else text


# ----------------------------------------------------------------------------- steps
@contextlib.contextmanager
def _dask_client(args: argparse.Namespace) -> Iterator[Any]:
    """Where a step's passes run: the scheduler of ``--dask-address``, connected once for all of
    them and checked to answer even when the step reads no rows (a fit from moments ingest
    computed): a cluster that is down is said at once, not when a later step needs it; else
    None (threads in this process)."""
    if not args.dask_address:
        yield None
        return
    from fairpca_dist.engine.cluster import connect

    with connect(args.dask_address) as client:
        yield client


def _ingest(args: argparse.Namespace) -> int:
    from fairpca_dist.io.ingest import ingest_table

    with _dask_client(args) as client:
        result = ingest_table(
            args.source,
            args.table_dir,
            sensitive_feature=args.sensitive_feature,
            features=args.features,
            exclude=args.exclude,
            key_columns=args.key_columns,
            pass_through=args.pass_through,
            on_bad_rows=args.on_bad_rows,
            read_options=_options(args.read_option),
            wide=args.wide,
            moments_budget=args.moments_budget,
            client=client,
            progress=True,
            storage_options=_storage_options(args),
        )
    counts, *left_out = result.summary().splitlines()  # then the columns left out, if any
    print("\n".join([f"ingested {counts} into {result.table_dir}", *left_out]))
    return 0


def _fit(args: argparse.Namespace) -> int:
    from fairpca_dist.fitting import fit_table, load_fitted

    with _dask_client(args) as client:
        model = fit_table(
            args.table_dir,
            args.model_dir,
            method=args.method,
            n_components=args.n_components,
            center=args.center,
            standardize=args.standardize,
            options=_options(args.option),
            wide=args.wide,
            moments_budget=args.moments_budget,
            announce=print,
            client=client,
            progress=True,
            storage_options=_storage_options(args),
        )
    _, moments = load_fitted(args.model_dir, _storage_options(args))  # the fit's moments.npz: no pass over the rows
    print("\n".join(_fit_lines(model, moments, args.model_dir)))
    return 0


SHOWN_GROUPS = 5
"""Groups a command's summary lists by name before "and N more" (the worst first)."""


def _fit_lines(model: FairProjection, moments: GroupMoments, model_dir: str) -> list[str]:
    """What ``fairpca fit`` prints: the method and r, its own criterion (named, with its direction)
    and value, the groups that criterion is about (the worst few), the solver's message, where
    the model is, and why the projection is wider than r when it is."""
    scores = score_projection(model, moments)
    criterion, value = own_criterion(model, scores)
    key = criterion.key
    names = group_display_names(model.group_labels, model.group_columns)
    direction = criterion.direction
    if value is None:  # measured on the rows: the solver's own estimate on its sample (fairpca report: every row)
        value = model.certificate.get("mmd2")
        shown = f"{value:.4g} (the solver's estimate)" if value is not None else "measured by fairpca report"
    else:
        shown = f"{value:.4g}"
    lines = [
        f"{model.method} r={model.n_components}: {criterion.title} ({direction}) = {shown}",
        *_group_lines(key, scores, names),
    ]
    columns = model.components.shape[1]
    reason = model.details.get("extra_columns_reason")  # also at the end of the message: said once, in the note
    message = model.message.replace(f"; {columns} columns, not r={model.n_components}: {reason}", "")
    lines.append(textwrap.fill(message, _WIDTH, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False))
    lines.append(f"  model in {model_dir}")
    if columns != model.n_components:  # a rank-relaxed solver (samadi-sdp, samadi-mw: rank <= r + k - 1) says why
        lines.append(
            textwrap.fill(
                f"note: the projection has {columns} columns, not r={model.n_components}: {reason or model.message}",
                _WIDTH,
                subsequent_indent="  ",
                break_on_hyphens=False,
            )
        )
    return lines


# Per criterion: the per-group quantity it is about, and whether its worst groups are its largest
_GROUP_QUANTITY = {
    "max_loss": ("group_loss", "loss", True),
    "abdiff": ("group_error", "error", True),
    "min_group_variance": ("group_variance", "variance", False),
    "explained_variance_ratio": ("group_explained_variance_ratio", "explained variance", False),
}


def _group_lines(key: str, scores: ProjectionScores, names: list[str]) -> list[str]:
    """The per-group values of the quantity criterion ``key`` is about, the worst
    :data:`SHOWN_GROUPS` first, one group per line (ABDiff: also the smallest error, its other
    end); for the linear MMD², the pair of groups whose projected means are farthest apart."""
    if key == "mmd2_linear":
        pairs = np.asarray(scores.mmd2_linear)
        a, b = np.unravel_index(int(np.argmax(pairs)), pairs.shape)
        return [f"  largest pair: {names[a]} vs {names[b]} = {pairs[a, b]:.4g}"]
    if key not in _GROUP_QUANTITY:
        return []
    field, quantity, largest_worst = _GROUP_QUANTITY[key]
    values = np.asarray(getattr(scores, field), dtype=float)
    order = list(np.argsort(-values if largest_worst else values, kind="stable"))
    head, rest = order[:SHOWN_GROUPS], len(order) - SHOWN_GROUPS
    tail = []
    if key == "abdiff" and rest > 0:  # ABDiff is the largest error minus the smallest: show that one too
        head, tail = order[: SHOWN_GROUPS - 1], order[-1:]
    width = max(len(names[i]) for i in [*head, *tail])
    lines = [f"  group {quantity}, {'largest' if largest_worst else 'smallest'} first:"]
    lines += [f"    {names[i]:<{width}}  {values[i]:.4g}" for i in head]
    if rest > 0:
        lines.append(f"    … and {len(order) - len(head) - len(tail)} more")
    lines += [f"    {names[i]:<{width}}  {values[i]:.4g}" for i in tail]
    return lines


def _project(args: argparse.Namespace) -> int:
    from fairpca_dist.projection import project_table

    with _dask_client(args) as client:
        result = project_table(
            args.model_dir,
            args.table_dir,
            args.out_dir,
            pass_through=args.pass_through,
            client=client,
            progress=True,
            storage_options=_storage_options(args),
        )
    print(f"projected {result.rows:,} rows into {result.out_dir} ({result.partitions} files)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from fairpca_dist.assessment.report import report_markdown_summary
    from fairpca_dist.fitting import write_table_report

    with _dask_client(args) as client:
        report, files = write_table_report(
            args.model_dir,
            args.table_dir,
            args.report_dir,
            target=args.target,
            max_components=args.max_components,
            sample_size=args.sample_size,
            rbf_mmd=args.rbf_mmd,
            group_names=dict(args.group_name),
            client=client,
            progress=True,
            announce=lambda line: print(line, flush=True),
            storage_options=_storage_options(args),
        )
    print(report_markdown_summary(report))
    print(f"\nreport: {files.markdown} (also report.html, report.json and PNGs)")
    return 0


def _method_options(pairs: Sequence[str], methods: Sequence[str], what: str) -> dict[str, dict[str, Any]]:
    """``METHOD:KEY=VALUE`` pairs, per method; ``--grid`` values are comma-separated lists."""
    by_method: dict[str, dict[str, Any]] = {method: {} for method in methods}
    for pair in pairs:
        method, sep, option = pair.partition(":")
        if not sep or method not in by_method:
            raise InputError(
                f"{what} {pair!r} must be METHOD:KEY=VALUE with METHOD one of the evaluated methods {list(methods)}"
            )
        parsed = _options([option])
        if what == "--grid":
            key, _, values = option.partition("=")
            parsed = {key: [_value(v) for v in values.split(",")]}
        by_method[method].update(parsed)
    return by_method


def _methods_and_options(args: argparse.Namespace, default: list[str]) -> dict[str, dict[str, Any]]:
    """The ``--method`` list (or ``default``) with each method's ``--option`` and ``--grid`` values."""
    methods = list(dict.fromkeys(args.method or default))
    options = _method_options(args.option, methods, "--option")
    for method, grid in _method_options(args.grid, methods, "--grid").items():
        options[method].update(grid)
    return options


def _evaluate(args: argparse.Namespace) -> int:
    from fairpca_dist.assessment.table_evaluation import evaluate_table

    options = _methods_and_options(args, ["pca", "fair-eig", "dro"])
    methods = list(options)
    print(
        f"fairpca evaluate: {', '.join(methods)}, r={args.n_components}, {args.splits} splits "
        f"({args.train_fraction:g} train), {args.folds}-fold CV, on {args.table_dir}"
    )
    with _dask_client(args) as client:
        evaluation = evaluate_table(
            args.table_dir,
            args.out_dir,
            options,
            n_components=args.n_components,
            n_cells=args.cells,
            cells_column=args.cells_column,
            cell_seed=args.cell_seed,
            n_splits=args.splits,
            train_fraction=args.train_fraction,
            n_folds=args.folds,
            center=args.center,
            standardize=args.standardize,
            random_state=args.seed,
            client=client,
            progress=True,
            storage_options=_storage_options(args),
        )
    print(evaluation.markdown())
    print(
        f"\n{sum(r.fits for r in evaluation.results)} fits in {evaluation.seconds:.1f} s; "
        f"evaluation.md, .json, .csv in {args.out_dir}"
    )
    return 0


def _ranks(text: str) -> list[int]:
    """``3``, ``1-5`` or ``2,4,6``: the ranks r of ``fairpca compare``."""
    first, dash, last = text.partition("-")
    ranks = (
        list(range(_positive_int(first), _positive_int(last) + 1))
        if dash
        else [_positive_int(part) for part in text.split(",")]
    )
    if not ranks:
        raise argparse.ArgumentTypeError(f"{text!r} gives no rank (write 3, 1-5 or 2,4,6)")
    return ranks


def _compare(args: argparse.Namespace) -> int:
    from fairpca_dist.assessment.table_comparison import compare_table

    options = _methods_and_options(args, list(SOLVERS))
    print(
        f"fairpca compare: {len(options)} methods at r = {', '.join(map(str, args.n_components))} on {args.table_dir}"
    )
    with _dask_client(args) as client:
        comparison = compare_table(
            args.table_dir,
            args.out_dir,
            n_components=args.n_components,
            methods=options,
            target=args.target,
            n_cells=args.cells,
            cells_column=args.cells_column,
            cell_seed=args.cell_seed,
            train_fraction=args.train_fraction,
            center=args.center,
            standardize=args.standardize,
            rbf_mmd=args.rbf_mmd,
            random_state=args.seed,
            client=client,
            progress=True,
            storage_options=_storage_options(args),
        )
    for line in comparison.summary():
        print(f"\n{line}")
    for r in comparison.ranks:
        print(f"\nr = {r}:")
        for line in comparison.reading(r):
            print(f"  {line}")
    print(
        f"\n{len(comparison.candidates)} fits in {comparison.seconds:.1f} s, {sum(comparison.passes.values())} "
        f"passes over the rows; comparison.md, .html, .json, .csv and PNGs in {args.out_dir}"
    )
    return 0


# ----------------------------------------------------------------------------- methods
_WIDTH = 100  # columns of the method listings


def _methods(args: argparse.Namespace) -> int:
    if args.name:
        print(_method_in_full(args.name))
        return 0
    print(f"{len(SOLVERS)} methods (fairpca fit --method METHOD; fairpca methods METHOD shows one in full):")
    for name in SOLVERS:
        print(_method_summary(name))
    return 0


def _criterion_words(method: str) -> str:
    """``"max group loss (lower is fairer)"``: the criterion the method makes fair, with its direction."""
    spec = SOLVERS[method]
    criterion = criterion_named(spec.criterion_of(option_defaults(method)))
    direction = criterion.direction
    return f"{criterion.title} ({direction}{', with the default options' if spec.criterion_needed else ''})"


def _facts(method: str) -> dict[str, str]:
    """What a person picks a method by: its criterion, the groups it takes, whether it reads the rows."""
    spec = SOLVERS[method]
    reads = "yes, at every iteration" if spec.reads_rows(option_defaults(method)) else "no, only the group moments"
    return {
        "criterion": _criterion_words(method),
        "groups": "2 only" if spec.two_groups else "2 or more",
        "reads rows": reads + (" (with the default options)" if spec.rows_needed else ""),
    }


def _method_summary(method: str) -> str:
    """A few lines on one method for ``fairpca methods``: what it does, its facts, its options."""
    facts = "; ".join(f"{name}: {value}" for name, value in _facts(method).items())
    options = ", ".join(f"{name}={default!r}" for name, default in option_defaults(method).items()) or "none"
    return "\n".join(
        [
            "",
            textwrap.fill(f"{method}: {SOLVERS[method].description}", _WIDTH, subsequent_indent="    "),
            textwrap.fill(facts, _WIDTH, initial_indent="  ", subsequent_indent="    "),
            textwrap.fill(f"options: {options}", _WIDTH, initial_indent="  ", subsequent_indent="    "),
        ]
    )


def _method_in_full(method: str) -> str:
    """``fairpca methods METHOD``: the method's description, its criterion and what it means, the
    groups it takes, whether it reads the rows, and each option with its default and the first
    paragraph of its description, wrapped to :data:`_WIDTH` columns."""
    if method not in SOLVERS:
        raise InputError(f"unknown method {method!r}; available: {', '.join(SOLVERS)}")
    spec = SOLVERS[method]
    facts = _facts(method)
    meaning = criterion_named(spec.criterion_of(option_defaults(method))).meaning
    lines = [
        textwrap.fill(f"{method}: {spec.description}", _WIDTH, subsequent_indent="    "),
        "",
        f"  {'criterion:':<12}{facts.pop('criterion')}",
        textwrap.fill(meaning, _WIDTH, initial_indent=" " * 14, subsequent_indent=" " * 14),
        *(f"  {name + ':':<12}{value}" for name, value in facts.items()),
    ]
    defaults = option_defaults(method)
    described = _option_lines(spec.solve)
    width = max((len(f"{name}={default!r}") for name, default in defaults.items()), default=0)
    lines += ["", "options (--option KEY=VALUE):" if defaults else "options: none"]
    for name, default in defaults.items():
        lines.append(
            textwrap.fill(
                f"{f'{name}={default!r}':<{width}}  {described.get(name, '')}".rstrip(),
                _WIDTH,
                initial_indent="  ",
                subsequent_indent=" " * (width + 4),
            )
        )
    return "\n".join(lines)


_ENTRY = re.compile(r"^\w+(, \w+)*( : .*)?$")  # the first line of a numpydoc parameter: "a, b : int"
_ROLE = re.compile(r":(?:\w+:)?\w+:`(~?)([^`<]*?)\s*(?:<[^`>]*>)?`")  # :func:`~a.b.c`, :class:`text <a.b>`
_LITERAL = re.compile(r"``(.+?)``")


def _plain(text: str) -> str:
    """Docstring text without Sphinx markup: ``:func:`~a.b.c``` → ``c``, ``:data:`X``` → ``X``,
    ``:class:`words <a.B>``` → ``words``, double-backquoted literals → their text."""

    def role(match: re.Match[str]) -> str:
        shown = match.group(2)
        return shown.rsplit(".", 1)[-1] if match.group(1) else shown

    return _LITERAL.sub(r"\1", _ROLE.sub(role, text))


def _option_lines(solve: Any) -> dict[str, str]:
    """The first paragraph of each option's description in the numpydoc "Parameters" section of
    ``solve``'s docstring, in full and without Sphinx markup (its type when it has no
    description), by option name."""
    lines = (inspect.getdoc(solve) or "").splitlines()
    starts = [i for i, line in enumerate(lines[:-1]) if line.strip() == "Parameters" and lines[i + 1].startswith("---")]
    section = lines[starts[0] + 2 :] if starts else []
    entries: dict[tuple[str, ...], list[str]] = {}  # the names of an entry: its type, then its first paragraph
    ended = False  # the entry's first paragraph has ended (a blank line)
    for line, following in zip(section, [*section[1:], ""], strict=True):
        if following.startswith("---") or (line and not line[0].isspace() and not _ENTRY.match(line)):
            break  # the next section's title, or a paragraph after the section
        if line and not line[0].isspace():
            names, _, kind = line.partition(" : ")
            entry = entries.setdefault(tuple(name.strip() for name in names.split(",")), [kind.strip()])
            ended = False
        elif not line.strip():
            ended = len(entries) > 0 and len(entry) > 1
        elif entries and not ended:
            entry.append(line.strip())
    described = {}
    for listed_names, (kind, *description) in entries.items():
        described.update(dict.fromkeys(listed_names, _plain(" ".join(description) or kind)))
    return described


class _HelpMethod(argparse.Action):
    """``--help-method [METHOD]``: describe METHOD (default: the ``--method`` given before it) and exit."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        try:
            print(_method_in_full(values or namespace.method))
        except InputError as error:
            parser.error(str(error))
        parser.exit()


def _pipeline(args: argparse.Namespace, launched: tuple[contextlib.ExitStack, Ready] | None = None) -> int:
    """``fairpca pipeline``. ``launched``: an API server the caller (the demo) launched already, as
    the exit stack that stops it (left here, whatever happens) and its ``ready``
    (:func:`fairpca_dist.flows.runtime.api_server`); without it, one is launched once the checks
    have passed (bad input leaves nothing in the Prefect home), before the imports of Prefect and
    the flows, which overlap its start."""
    from fairpca_dist.flows.api_server import launched_early

    stack, ready = launched or (contextlib.ExitStack(), None)
    with stack:  # leaving it stops the server, once the flows are done (counted in the time below)
        from fairpca_dist.io.runs import check_run

        begun = time.perf_counter()
        print(
            f"fairpca pipeline: {args.method}, n_components={args.n_components}, groups by "
            f"{', '.join(args.sensitive_feature)}, on {args.source}"
        )
        run = dict(
            source=args.source,
            sensitive_feature=args.sensitive_feature,
            runs_dir=args.runs_dir,
            run_id=args.run_id,
            features=args.features,
            exclude=args.exclude,
            key_columns=args.key_columns,
            target=args.target,
            method=args.method,
            n_components=args.n_components,
            center=args.center,
            options=_options(args.option),
            on_bad_rows=args.on_bad_rows,
            dask_address=args.dask_address,
            read_options=_options(args.read_option) or None,
            storage_options=_storage_options(args),
            overwrite=args.overwrite,
            wide=args.wide,
            moments_budget=args.moments_budget,
        )
        check_run(**run)  # bad input fails here, in seconds, before Prefect is imported or started
        checks = time.perf_counter() - begun
        early = None if ready else stack.enter_context(launched_early())
        ready = ready or stack.enter_context(_api_server(early))  # it starts while the flows are imported
        from fairpca_dist.flows.pipeline import pipeline
        from fairpca_dist.flows.steps import show_step_lines

        # this module's, the demo's before this (its table aside), and the flows'
        table = getattr(args, "demo_table", 0.0)  # the demo's (_demo); none for `fairpca pipeline`
        imports = begun - args.started - table + time.perf_counter() - begun - checks
        args.console.quiet_prefect()
        server = ready(_ahead_of_the_run(args))  # which imports what Prefect imports at a first flow run, too
        _collect_from_now_on()  # every library the run needs is imported
        print(f"  prefect  {server.describe()}")
        with show_step_lines(echo=not args.verbose) as lines:  # with -v, Prefect's console shows them
            result = pipeline(**run, standardize=args.standardize, group_names=dict(args.group_name) or None)
    from fairpca_dist.assessment.report import REPORT_FILE, report_markdown_summary
    from fairpca_dist.io.storage import locate
    from fairpca_dist.io.versions import committed

    report_dir = committed(locate(result["report"]["report_dir"], _storage_options(args)))
    report = json.loads((report_dir / REPORT_FILE).read_text())
    print("\n" + report_markdown_summary(report))
    total = time.perf_counter() - args.started
    steps = {**lines.seconds, **({"demo table": table} if table else {})}
    breakdown = _time_breakdown(total, imports, checks, server.meanwhile, server.waited, steps)
    print(f"\nfinished in {total:.1f} s{breakdown}")
    print(
        f"everything is in {result['run_dir']}: report {result['report']['markdown']} (and report.html, "
        f"report.json, PNGs), model in {result['model']['model_dir']}, projections in {result['projected']['out_dir']}"
    )
    return 0


def _ahead_of_the_run(args: argparse.Namespace) -> tuple[Callable[[], object], ...]:
    """Work of the pipeline's run that the command does while its temporary API server starts,
    if the server is not up and warm first (:class:`fairpca_dist.flows.runtime.Ready`): loading
    the moments kernel's compiled loops, unless the passes run on a cluster's workers
    (``--dask-address``); importing the report's modules (matplotlib) and, with a target column,
    the libraries of its downstream classifier (scikit-learn, fairlearn): the report task runs in
    this process."""
    from fairpca_dist.assessment.downstream import import_classifier_libraries

    kernels = () if args.dask_address else (_load_kernels,)
    classifier = (import_classifier_libraries,) if args.target else ()
    return (*kernels, *classifier, _import_report_modules)


def _load_kernels() -> None:
    """Load the moments kernel's compiled loops (:mod:`fairpca_dist.engine.gram`) from Numba's
    disk cache by computing the moments of two rows: the first kernel a process runs costs
    0.6-0.7 s of a core (Numba's and LLVM's set-up, most of it), each one after that ~0.03 s."""
    GroupMoments.from_codes(np.ones((2, 2)), np.array([0, 1]), (0, 1))


def _import_report_modules() -> None:
    """Import the report's modules, with matplotlib (0.5-0.7 s)."""
    import fairpca_dist.assessment.report  # noqa: F401


def _api_server(launched: TemporaryServer | None) -> contextlib.AbstractContextManager[Ready]:
    """:func:`fairpca_dist.flows.runtime.api_server` with the server ``launched`` early, announcing on
    standard output."""
    from fairpca_dist.flows.runtime import api_server

    return api_server(announce=lambda message: print(f"  prefect  {message}", flush=True), launched=launched)


def _time_breakdown(
    total: float, imports: float, checks: float, ahead: float, server: float, steps: dict[str, float]
) -> str:
    """``": checks 0.2 s, imports 2.0 s, ahead 0.9 s, Prefect API 0.4 s, dask 0.3 s, ingest 0.4 s, …,
    Prefect runs 2.1 s"``: where the ``total`` time of the command went; "imports" are the
    command's own (from the import of this module), "ahead" the run's work done while the API
    server started (:func:`_ahead_of_the_run`, and what Prefect imports at a first flow run),
    "Prefect API" the wait for the server (it starts during the imports), "Prefect runs" the rest
    (flow and task runs' API calls and states), shown after the pipeline's steps; a
    ``"demo table"`` entry of ``steps`` comes last."""
    steps = dict(steps)
    table = {"demo table": steps.pop("demo table")} if "demo table" in steps else {}
    parts = {"checks": checks, "imports": imports, "ahead": ahead, "Prefect API": server, **steps}
    parts["Prefect runs"] = max(total - sum(parts.values()) - sum(table.values()), 0.0)
    return ": " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in {**parts, **table}.items())


def _demo(args: argparse.Namespace) -> int:
    from fairpca_dist.flows.api_server import launched_early

    with contextlib.ExitStack() as stack:
        # first (bad input stops it): it starts while the demo imports Prefect and the flows, and writes its table;
        # the command launched it as it started (_launch_demo_server), unless a program runs the demo (main(argv))
        early = _DEMO_SERVER.pop() if _DEMO_SERVER else None
        if early is None:
            launched = stack.enter_context(launched_early())
        else:
            stack.enter_context(early[0])
            launched = early[1]
        from fairpca_dist.flows.runtime import check_configured_api
        from fairpca_dist.io.storage import is_url, local_path

        check_run_parameters(run_id=args.run_id or None)  # before the source is written into the run folder
        if is_url(args.runs_dir):
            raise InputError(
                f"--runs-dir {args.runs_dir}: the demo writes its table and runs to a local folder; on "
                "object storage, run `fairpca pipeline SOURCE --runs-dir URL` on your own table"
            )
        check_configured_api()
        run_id = args.run_id or time.strftime("demo-%Y%m%d-%H%M%S")
        run_dir = Path(local_path(args.runs_dir)) / run_id
        if run_dir.exists():  # the demo writes its source there: never over a file of the user's
            raise InputError(
                f"{run_dir} exists; the demo writes a new run folder: choose another --run-id (or remove it)"
            )
        ready = stack.enter_context(_api_server(launched))
        if args.synthetic_rows:
            _collect_from_now_on()  # many rows generated: garbage made from here on is collected
        writing = time.perf_counter()
        demo = _demo_pipeline_args(args, run_id, run_dir)
        demo.demo_table = time.perf_counter() - writing
        return _pipeline(demo, (stack.pop_all(), ready))


def _demo_pipeline_args(args: argparse.Namespace, run_id: str, run_dir: Path) -> argparse.Namespace:
    """Write the demo's table into ``run_dir``; return the arguments of ``fairpca pipeline`` on it."""
    from fairpca_dist.io.datasets import load_diabetes_table, write_synthetic_parquet

    if args.synthetic_rows:
        source = write_synthetic_parquet(
            run_dir / "source.parquet", args.synthetic_rows, rows_per_file=args.rows_per_file
        )
        print(f"wrote {args.synthetic_rows:,} synthetic rows to {source}")
        settings = {
            "source": str(source),
            "sensitive_feature": ["group"],
            "key_columns": ["row_id"],
            "target": None,
            "features": None,
        }
    else:
        frame = load_diabetes_table()
        progression = frame.pop("target")
        frame["high_progression"] = (progression > progression.median()).astype(int)
        run_dir.mkdir(parents=True, exist_ok=True)
        source = run_dir / "diabetes.csv"
        frame.rename_axis("patient").reset_index().to_csv(source, index=False)
        print(f"diabetes table (scikit-learn, 442 rows; sensitive feature 'sex') written to {source}")
        settings = {
            "source": str(source),
            "sensitive_feature": ["sex"],
            "key_columns": ["patient"],
            "target": "high_progression",
            "features": ["age", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"],
        }
    return argparse.Namespace(
        **settings,
        runs_dir=args.runs_dir,
        run_id=run_id,
        method=args.method,
        n_components=args.n_components,
        center="group",
        standardize=True,
        option=[],
        read_option=[],
        storage_option=args.storage_option,
        on_bad_rows="fail",
        exclude=[],
        overwrite=False,
        wide=None,
        moments_budget=None,
        group_name=[],
        dask_address=args.dask_address,
        verbose=args.verbose,
        console=args.console,
        started=args.started,
    )


def _storage_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``--storage-option`` pairs, as the library's ``storage_options`` (None if none)."""
    return _options(args.storage_option) or None


# ----------------------------------------------------------------------------- parser
def _add_dask(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dask-address", default=None, help="address of a running Dask scheduler (default: a local cluster)"
    )
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option of the filesystem of s3://, gs://, abfs://... paths, repeatable (e.g. "
        "--storage-option endpoint_url=http://minio:9000); credentials come from the "
        "environment (AWS_ACCESS_KEY_ID, ...)",
    )


def _add_fit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", default="fair-eig", choices=sorted(SOLVERS), help="solver (default fair-eig)")
    parser.add_argument("--n-components", type=_positive_int, default=2, help="target dimension r (default 2)")
    parser.add_argument("--center", default="group", choices=CENTERS, help="centring of the group losses")
    parser.add_argument(
        "--standardize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="divide features by their pooled standard deviation (default on)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="solver option, repeatable (e.g. --option tol=1e-8)",
    )


def _add_wide(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wide",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep only the diagonal of the moments and fit by passes over the rows (fnpm-streaming), for a "
        "table too wide for its p x p moments; default: when they would exceed --moments-budget (the "
        "command says so)",
    )
    parser.add_argument(
        "--moments-budget",
        type=_byte_count,
        default=None,
        metavar="BYTES",
        help="memory the p x p moments (k groups x p^2 x 8 bytes) may take before a fit goes wide "
        "(default 1GB, or 1/11 of the smallest Dask worker's memory limit when that is less; e.g. 4GB)",
    )


def _add_group_names(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--group-name",
        type=_group_name,
        action="append",
        default=[],
        metavar="[COLUMN=]VALUE=NAME",
        help="name a value of the sensitive column in the report, repeatable: --group-name 1=female "
        "shows the group sex=1 as sex=female; COLUMN= picks one column's value among several",
    )


def _add_table_roles(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sensitive-feature",
        nargs="+",
        required=True,
        metavar="COLUMN",
        help="group column(s); several form intersectional groups",
    )
    parser.add_argument(
        "--features",
        nargs="+",
        default=None,
        metavar="COLUMN",
        help="feature columns (default: every numeric column not otherwise used)",
    )
    parser.add_argument(
        "--exclude", nargs="+", default=[], metavar="COLUMN", help="columns to leave out of the default features"
    )
    parser.add_argument(
        "--key-columns",
        nargs="+",
        default=[],
        metavar="COLUMN",
        help="identifier columns carried through to the projection",
    )
    parser.add_argument(
        "--on-bad-rows",
        default="fail",
        choices=["fail", "drop"],
        help="rows with NaN/inf features or missing groups: fail (default) or drop and record",
    )
    parser.add_argument(
        "--read-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option of the CSV reader (pandas.read_csv) or the Parquet reader, repeatable; values are "
        "Python or JSON literals, else text (e.g. a file without a header line: "
        "--read-option header=None; '?' marks a missing value: --read-option "
        "na_values='[\"?\"]'; --read-option sep=';')",
    )


def _parser() -> argparse.ArgumentParser:
    from fairpca_dist import __version__

    parser = argparse.ArgumentParser(prog="fairpca", description="Fair PCA on large tables.")
    parser.add_argument("--version", action="version", version=f"fairpca_dist {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the full logs of Prefect, Dask and distributed (default: warnings only)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add_command = functools.partial(commands.add_parser, parents=[common])

    ingest = add_command("ingest", help="source table -> validated Parquet + schema.json")
    ingest.add_argument("source", help="CSV or Parquet file, folder or glob")
    ingest.add_argument("table_dir", help="output folder")
    _add_table_roles(ingest)
    ingest.add_argument(
        "--pass-through",
        nargs="+",
        default=[],
        metavar="COLUMN",
        help="further columns to keep (e.g. a target for the report)",
    )
    _add_wide(ingest)
    _add_dask(ingest)
    ingest.set_defaults(handler=_ingest)

    fit = add_command("fit", help="ingested table -> moments.npz + model (moments cached per file)")
    fit.add_argument("table_dir")
    fit.add_argument("model_dir")
    _add_fit_options(fit)
    _add_wide(fit)
    fit.add_argument(
        "--help-method",
        action=_HelpMethod,
        nargs="?",
        metavar="METHOD",
        help="describe METHOD (default: the --method given before this flag): its criterion, the groups "
        "it takes, whether it reads the rows, its options and their defaults; then exit",
    )
    _add_dask(fit)
    fit.set_defaults(handler=_fit)

    project = add_command("project", help="apply a model to a table -> Parquet (atomic, _SUCCESS)")
    project.add_argument("model_dir")
    project.add_argument("table_dir")
    project.add_argument("out_dir")
    project.add_argument("--pass-through", nargs="+", default=[], metavar="COLUMN", help="columns to carry through")
    _add_dask(project)
    project.set_defaults(handler=_project)

    report = add_command("report", help="fairness report: json, md, html, PNGs")
    report.add_argument("model_dir")
    report.add_argument("table_dir")
    report.add_argument("report_dir")
    report.add_argument("--target", default=None, help="binary label column for the downstream parity check")
    report.add_argument("--max-components", type=_positive_int, default=None, help="largest r in the curves")
    report.add_argument(
        "--sample-size", type=_positive_int, default=50_000, help="rows sampled for the downstream check"
    )
    report.add_argument(
        "--rbf-mmd",
        default="auto",
        choices=RBF_MMD_CHOICES,
        help="RBF-kernel MMD² of the projected groups over every row: all pairs (exact), random "
        f"Fourier features (rff), auto (exact up to {RBF_EXACT_MAX_ROWS:,} rows) or none",
    )
    _add_group_names(report)
    _add_dask(report)
    report.set_defaults(handler=_report)

    evaluate = add_command(
        "evaluate",
        help="cross-validated ABDiff/ARE of methods over repeated train/test splits (one pass)",
        description="The evaluation protocol of Vu et al. (ICLR 2022): random train/test splits of hash cells of "
        "the rows, k-fold cross-validation of each method's grid on the training part (minimising ABDiff + ARE), "
        "out-of-sample and in-sample scores of the refit; every split and fold from one pass over the rows.",
    )
    evaluate.add_argument("table_dir", help="ingested table (fairpca ingest)")
    evaluate.add_argument("out_dir", help="folder for evaluation.md, .json, .csv and tradeoff.png")
    evaluate.add_argument(
        "--method",
        action="append",
        choices=sorted(SOLVERS),
        metavar="METHOD",
        help="method to evaluate, repeatable (default: pca, fair-eig, dro)",
    )
    evaluate.add_argument("--n-components", type=_positive_int, default=3, help="target dimension r (default 3)")
    evaluate.add_argument("--center", default="group", choices=CENTERS, help="centring of the group errors")
    evaluate.add_argument(
        "--standardize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="z-score each fit with its training rows' statistics (default on)",
    )
    evaluate.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="METHOD:KEY=VALUE",
        help="fixed solver option, repeatable (e.g. dro:alpha=0.1)",
    )
    evaluate.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="METHOD:KEY=V1,V2,...",
        help="values to cross-validate, repeatable (default: the paper's grids, e.g. dro's alpha and lam)",
    )
    evaluate.add_argument("--splits", type=_positive_int, default=10, help="train/test splits (default 10)")
    evaluate.add_argument("--train-fraction", type=float, default=0.3, help="training share (default 0.3)")
    evaluate.add_argument("--folds", type=_positive_int, default=3, help="cross-validation folds (default 3)")
    evaluate.add_argument(
        "--cells",
        type=_positive_int,
        default=10,
        help="hash cells of the key columns (default 10); splits are unions of cells",
    )
    evaluate.add_argument("--cells-column", default=None, help="use this column's values as the cells instead")
    evaluate.add_argument("--cell-seed", type=int, default=0, help="seed of the hash cells (default 0)")
    evaluate.add_argument("--seed", type=int, default=0, help="seed of the splits and the solvers (default 0)")
    _add_dask(evaluate)
    evaluate.set_defaults(handler=_evaluate)

    compare = add_command(
        "compare",
        help="every method (over its grid) by every fairness criterion, in and out of sample",
        description="Fit every registered method ("
        "each over its grid, fairpca_dist.assessment.comparison.COMPARE_GRIDS) and "
        "score each fit by every criterion; writes comparison.md/.html/.json/.csv and Pareto PNGs.",
    )
    compare.add_argument("table_dir", help="ingested table (fairpca ingest)")
    compare.add_argument("out_dir", help="folder of the comparison report")
    compare.add_argument(
        "--method",
        action="append",
        choices=sorted(SOLVERS),
        metavar="METHOD",
        help="method to compare, repeatable (default: every registered method)",
    )
    compare.add_argument(
        "--n-components",
        type=_ranks,
        default=[2],
        metavar="R",
        help="rank(s): 3, 1-5 or 2,4,6 (default 2); several draw per-group error curves",
    )
    compare.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="METHOD:KEY=VALUE",
        help="fixed option of one method, repeatable",
    )
    compare.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="METHOD:KEY=V1,V2,...",
        help="values of one option to sweep, repeatable (replaces the default grid)",
    )
    compare.add_argument("--target", default=None, help="binary label column for the downstream classifier")
    compare.add_argument("--center", default="group", choices=CENTERS, help="centring of the group errors")
    compare.add_argument(
        "--standardize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="scale features by their standard deviation (default on)",
    )
    compare.add_argument(
        "--rbf-mmd",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="RBF-kernel MMD² of every fit over every row by random features (default on)",
    )
    compare.add_argument("--train-fraction", type=float, default=0.7, help="share of cells for training (default 0.7)")
    compare.add_argument("--cells", type=_positive_int, default=10, help="hash cells of the rows (default 10)")
    compare.add_argument("--cells-column", default=None, help="use this column's values as the cells instead")
    compare.add_argument("--cell-seed", type=int, default=0, help="seed of the hash cells (default 0)")
    compare.add_argument("--seed", type=int, default=0, help="seed of the split, solvers and features (default 0)")
    _add_dask(compare)
    compare.set_defaults(handler=_compare)

    pipeline = add_command("pipeline", help="run the Prefect pipeline: ingest -> fit -> project -> report")
    pipeline.add_argument("source")
    _add_table_roles(pipeline)
    pipeline.add_argument("--target", default=None, help="binary label column for the downstream parity check")
    pipeline.add_argument("--runs-dir", default="runs", help="parent of the run folder (default runs/)")
    pipeline.add_argument(
        "--run-id",
        default=None,
        help="run folder name (default: a new one, e.g. fair-eig-r2-20250101-120000-1a2b3c4d); one "
        "that holds a previous run is refused unless --overwrite",
    )
    pipeline.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run folder of an existing --run-id, whole, once the new run completes (a "
        "failed run leaves it as it was; on object storage each step's output is replaced when "
        "that step completes)",
    )
    _add_fit_options(pipeline)
    _add_wide(pipeline)
    _add_group_names(pipeline)
    _add_dask(pipeline)
    pipeline.set_defaults(handler=_pipeline)

    methods = add_command(
        "methods",
        help="the fair-PCA methods: criterion, groups, rows read, options and defaults",
        description="Every registered method, or one in full.",
    )
    methods.add_argument("name", nargs="?", metavar="METHOD", help="show this method in full")
    methods.set_defaults(handler=_methods)

    demo = add_command(
        "demo",
        help="run the pipeline on an embedded table (scikit-learn's diabetes data) into runs/<run-id>/",
        description="Run the whole pipeline on scikit-learn's diabetes table (sensitive feature: sex; "
        "target: disease progression above the median) or on a generated Parquet table.",
    )
    demo.add_argument("--method", default="fair-eig", choices=sorted(SOLVERS), help="fair method (default fair-eig)")
    demo.add_argument("--n-components", type=_positive_int, default=2)
    demo.add_argument(
        "--synthetic-rows",
        type=_synthetic_rows,
        default=0,
        metavar="N",
        help="use a generated N-row Parquet table with group-dependent covariance instead",
    )
    demo.add_argument("--rows-per-file", type=_positive_int, default=500_000, help="rows per generated Parquet file")
    demo.add_argument("--runs-dir", default="runs")
    demo.add_argument("--run-id", default=None)
    _add_dask(demo)
    demo.set_defaults(handler=_demo)
    return parser


class _Console:
    """What a command shows of the libraries' logs.

    With ``--verbose``: everything, as the libraries log it. Without: Dask's and
    distributed's INFO lines (workers and clients starting and stopping) and Prefect's console
    INFO lines are not shown (Prefect's still reach its API: run logs in the UI); warnings
    are; error records are held back, because the command reports a failure itself — one line
    for bad input, the held records and a traceback for anything else.
    """

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.held: list[logging.LogRecord] = []
        self._handlers: list[logging.Handler] = []
        if not verbose:
            for name in ("distributed", "dask"):
                logging.getLogger(name).setLevel(logging.WARNING)

    def quiet_prefect(self) -> None:
        """Apply the rules to Prefect's console handler (call once Prefect is imported)."""
        if self.verbose:
            return
        from prefect.logging.handlers import PrefectConsoleHandler

        for handler in logging.getLogger().handlers:
            if isinstance(handler, PrefectConsoleHandler) and handler not in self._handlers:
                handler.setLevel(logging.WARNING)
                handler.addFilter(self._hold_errors)
                self._handlers.append(handler)

    @contextlib.contextmanager
    def warnings_as_lines(self) -> Iterator[None]:
        """Within: a warning prints as one line, ``fairpca: warning: <message>``; other libraries'
        deprecation notices are shown (as Python shows them) only with ``--verbose``."""
        original = warnings.showwarning

        def show(
            message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None
        ) -> None:
            if not issubclass(category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
                print(f"fairpca: warning: {' '.join(str(message).split())}", file=sys.stderr)  # one line
            elif self.verbose:
                original(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        try:
            yield
        finally:
            warnings.showwarning = original

    def _hold_errors(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.held.append(record)
            return False
        return True

    def mute(self) -> None:
        """From now on no library log reaches the terminal (the command was interrupted: what they
        would say is about the work being torn down, not its cause); with ``--verbose`` they do."""
        if self.verbose:
            return
        loggers = [
            logging.getLogger(),
            *(logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)),
        ]
        for logger in loggers:
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                    handler.setLevel(logging.CRITICAL + 1)

    def replay(self) -> None:
        """Show the held error records (the command failed for a reason other than bad input)."""
        for handler in self._handlers:
            handler.removeFilter(self._hold_errors)
            for record in self.held:
                handler.handle(record)


class _Interrupt(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised in the main thread. A ``KeyboardInterrupt``, so that the command
    stops as on Ctrl-C whichever signal came: through every ``finally`` and ``except
    BaseException`` (a pass waits for its tasks in flight, staging folders are removed, locks
    released, a flow run is marked crashed), and nothing retries it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _signals_as_interrupts(console: _Console) -> Iterator[None]:
    """Within (in the main thread; elsewhere signals cannot be handled): SIGINT and SIGTERM mute
    the ``console`` and raise :class:`_Interrupt`. Inside flow runs Prefect handles SIGTERM
    itself (the run is marked crashed) and passes it on to this handler when the run has ended."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        console.mute()
        raise _Interrupt(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupted(interrupt: KeyboardInterrupt) -> int:
    """Say in one line that the command was interrupted; return 128 + the signal's number."""
    signum = interrupt.signum if isinstance(interrupt, _Interrupt) else signal.SIGINT
    print(
        f"fairpca: interrupted ({signal.Signals(signum).name}); unfinished outputs were removed, previous ones "
        "left as they were",
        file=sys.stderr,
    )
    return 128 + signum


def _environment_error(error: OSError | MemoryError) -> str:
    """One line for an error of the machine the library had no more specific words for: the
    operating system's reason and the path it names."""
    if isinstance(error, MemoryError):
        return f"out of memory ({error or 'MemoryError'}): give the command more memory, or use a Dask cluster"
    reason = error.strerror or " ".join(str(error).split()) or type(error).__name__
    paths = [os.fspath(name) for name in (error.filename, error.filename2) if name is not None]
    return f"{reason}{': ' + ' -> '.join(paths) if paths else ''}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fairpca`` console script. A reader that closes the output early
    (``fairpca methods | head``) ends the command quietly, with the status 141 (128 + SIGPIPE)
    a command killed by a closed pipe has.

    Run as the program (``argv`` None: the console script, ``python -m fairpca_dist.cli``), the
    command leaves what it made to the exit (:func:`gc.freeze`): the interpreter's garbage
    collections at exit then skip those objects, and a pipeline's ~330,000 (Prefect, dask,
    pandas…) took them 1-1.5 s of a 2-core machine; memory is returned to the system either way.
    """
    try:
        try:
            return _command(argv)
        finally:
            for early in _DEMO_SERVER:  # launched for a demo that did not start (a bad option)
                if early is not None:
                    early[0].close()
            _DEMO_SERVER.clear()
            _collect_from_now_on()  # (a command that failed before its imports were done)
            sys.stdout.flush()  # here, not at exit, so that a closed pipe is seen here
            if argv is None:
                gc.freeze()
    except BrokenPipeError:
        # Python's recipe: point stdout at devnull, so that the interpreter's last flush at exit writes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _command(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run its command; a failure becomes one line on stderr and an exit status."""
    # the command's time starts with the imports of this module (for the first command of the process)
    started = time.perf_counter() - (_IMPORT_SECONDS.pop() if _IMPORT_SECONDS else 0.0)
    args = _parser().parse_args(argv)
    args.console = console = _Console(args.verbose)
    args.started = started
    try:
        with _signals_as_interrupts(console), console.warnings_as_lines():
            code = int(args.handler(args))
    except FairPCAError as error:
        print(f"fairpca: error: {' '.join(str(error).splitlines())}", file=sys.stderr)  # one line
        return 2
    except KeyboardInterrupt as interrupt:
        return _interrupted(interrupt)
    except BrokenPipeError:  # the reader of the output is gone: main ends quietly
        raise
    except (OSError, MemoryError) as error:  # the environment, not this program: a path, a disk, memory
        if args.verbose:
            console.replay()
            raise
        print(f"fairpca: error: {_environment_error(error)} (run with -v for the details)", file=sys.stderr)
        return 2
    except BaseException:
        console.replay()
        raise
    if console.held:
        print(
            f"fairpca: {len(console.held)} error(s) were logged and recovered from (e.g. a task retried); "
            "run with -v to see them",
            file=sys.stderr,
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
