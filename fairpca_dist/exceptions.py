"""The exceptions fairpca_dist raises.

Every error derives from :class:`FairPCAError` and also from the builtin type callers
already catch (as ``sklearn.exceptions.NotFittedError`` does), so ``except ValueError``
keeps working. Input errors are deterministic: pipelines must not retry them.
"""

from __future__ import annotations

__all__ = [
    "FairPCAError",
    "InputError",
    "SchemaError",
    "GroupError",
    "ReadError",
    "SolverError",
    "WriteError",
    "OutputBusyError",
    "ConvergenceWarning",
    "ModelWarning",
]


class FairPCAError(Exception):
    """Base class of every error raised by fairpca_dist."""


class InputError(FairPCAError, ValueError):
    """Bad arguments or bad data values (NaN, inf, out-of-range parameters)."""


class SchemaError(InputError):
    """A column is missing, misspelt or has a dtype that cannot be used."""


class GroupError(InputError):
    """The sensitive feature defines unusable groups (one group, a group with too few rows)."""


class ReadError(InputError):
    """A file or partition could not be read as the table it claims to be (a corrupt file,
    values that do not parse as their column's type, a column missing from one file).
    The message names the partition and, for files, the file."""


class SolverError(FairPCAError, RuntimeError):
    """A solver failed on valid input (infeasible problem, non-finite objective)."""


class WriteError(FairPCAError, OSError):
    """An output could not be written because its disk is full or read-only. The message names
    the output; the partial output was removed and the previous version, if any, is intact.
    ``errno`` is the operating system's (e.g. ``ENOSPC``)."""


class OutputBusyError(FairPCAError, RuntimeError):
    """Another run (thread or process) is writing the same output; the message names it.
    Nothing was written: rerun when that run has finished, or write elsewhere."""


class ConvergenceWarning(UserWarning):
    """A solver stopped before meeting its tolerance; also recorded as ``converged=False``."""


class ModelWarning(UserWarning):
    """The data violate a premise of the method as published (e.g. the conditions of a
    closed form); the fit goes on with what is right and says which premise failed."""
