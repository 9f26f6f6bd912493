"""The CLI's error convention, shared by every subcommand, and the one place that maps
errors to exit statuses.

A command reports bad input by raising :class:`UsageError` (exit status 2)
and a check that ran and failed (a trace CRC mismatch, a verification
mismatch) by raising :class:`CheckFailed` (exit status 1).  The libraries raise
their own package errors, which :func:`exit_status` maps the same way: input a
package refuses (``accel.errors.AccelInputError``,
``tengine_host.errors.TengineInputError``) is 2, a check a package ran and saw
fail (``accel.errors.AccelCheckFailed``) is 1.  ``opendla.cli.main`` prints
any of them as one ``error: ...`` line on stderr; every other exception is a bug
and keeps its traceback.  Messages name the file or value at fault and what is
allowed, in the command line's own terms (option names, not Python argument
names).
"""

from __future__ import annotations

from accel.errors import AccelCheckFailed, AccelInputError
from tengine_host.errors import TengineInputError

#: exit status of a check that ran and did not pass
CHECK_FAILED = 1
#: exit status of bad usage or input
BAD_INPUT = 2


class CliError(Exception):
    """Base of the errors ``opendla`` reports without a traceback."""

    exit_code = BAD_INPUT


class UsageError(CliError):
    """Bad input or usage: a missing file, a value outside its choices, a malformed array."""

    exit_code = BAD_INPUT


class CheckFailed(CliError):
    """A check ran and did not pass (the report was printed before raising)."""

    exit_code = CHECK_FAILED


def exit_status(exc: BaseException) -> int | None:
    """The exit status that reports ``exc`` as one ``error:`` line, or None for an error
    that is a bug (shown with its traceback)."""
    if isinstance(exc, CliError):
        return exc.exit_code
    if isinstance(exc, AccelCheckFailed):
        return CHECK_FAILED
    if isinstance(exc, (AccelInputError, TengineInputError)):
        return BAD_INPUT
    return None
