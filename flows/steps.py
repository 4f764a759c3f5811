"""Step lines: one line when a pipeline step starts and one when it finishes, with its time.

They are logged through the flow-run logger, so they appear in the Prefect UI with the run's
other logs, and carry a marker (``extra={"fairpca_step": ...}``) so that a command line can
show exactly these lines while Prefect's own console output stays at WARNING
(:func:`show_step_lines`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from prefect.logging import get_run_logger

__all__ = ["step", "log_step", "StepOutcome", "StepLines", "show_step_lines"]

_MARK = "fairpca_step"
_WIDTH = 8  # step names are padded to this width so the lines align


@dataclass
class StepOutcome:
    """What the body of :func:`step` tells the finish line (e.g. ``442 rows``)."""

    summary: str = ""


def log_step(name: str, message: str, seconds: float | None = None) -> None:
    """Log one step line: ``name`` padded, then ``message``; ``seconds`` is recorded for the
    time breakdown a command prints at the end."""
    get_run_logger().info("%-*s %s", _WIDTH, name, message, extra={_MARK: name, "fairpca_seconds": seconds})


@contextlib.contextmanager
def step(name: str) -> Iterator[StepOutcome]:
    """Log ``name`` starting, run the body, log it finished with its time and the body's
    :attr:`StepOutcome.summary`. A failing body logs nothing more: Prefect reports the error."""
    log_step(name, "started")
    started = time.perf_counter()
    outcome = StepOutcome()
    yield outcome
    seconds = time.perf_counter() - started
    log_step(name, f"done in {seconds:.1f} s" + (f": {outcome.summary}" if outcome.summary else ""), seconds)


class StepLines(logging.Handler):
    """Keeps each finished step's time (in order) and, with ``echo``, writes the step lines
    to ``stream``."""

    def __init__(self, stream: TextIO | None = None, *, echo: bool = True) -> None:
        super().__init__(logging.INFO)
        self.stream = stream or sys.stdout
        self.echo = echo
        self.seconds: dict[str, float] = {}
        self.addFilter(lambda record: hasattr(record, _MARK))

    def emit(self, record: logging.LogRecord) -> None:
        seconds = getattr(record, "fairpca_seconds", None)
        if seconds is not None:
            self.seconds[getattr(record, _MARK)] = seconds
        if self.echo:
            self.stream.write(f"  {record.getMessage()}\n")
            self.stream.flush()


@contextlib.contextmanager
def show_step_lines(stream: TextIO | None = None, *, echo: bool = True) -> Iterator[StepLines]:
    """While inside, collect the step times of flow runs in this process and, with ``echo``,
    write their step lines to ``stream`` (default standard output)."""
    handler = StepLines(stream, echo=echo)
    logger = logging.getLogger("prefect.flow_runs")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
