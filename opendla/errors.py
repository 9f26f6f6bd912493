"""The CLI's error convention, shared by every subcommand.

A command reports bad input by raising :class:`UsageError` (exit status 2)
and a check that ran and failed (a trace CRC mismatch, a verification
mismatch) by raising :class:`CheckFailed` (exit status 1).  ``opendla.cli.main``
prints either as one ``error: ...`` line on stderr; messages name the file or
value at fault and what is allowed, in the command line's own terms (option
names, not Python argument names).
"""

from __future__ import annotations


class CliError(Exception):
    """Base of the errors ``opendla`` reports without a traceback."""

    exit_code = 2


class UsageError(CliError):
    """Bad input or usage: a missing file, a value outside its choices, a malformed array."""

    exit_code = 2


class CheckFailed(CliError):
    """A check ran and did not pass (the report was printed before raising)."""

    exit_code = 1
