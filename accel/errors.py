"""The one base of every error the accelerator side raises.

:class:`AccelError` is the root for the cmodel, the compiler, the runtime, the
loadable reader and the RTL, so a caller catches "anything the accelerator
refused" with one ``except`` and still lets built-in errors (bugs) through.  Two
branches say what kind of failure it is, which is what a command line needs to
choose its exit status (``opendla.errors.exit_status``):

* :class:`AccelInputError` - the input cannot be used (a malformed loadable or
  trace, register programming the hardware forbids); the message names it;
* :class:`AccelCheckFailed` - a check ran and found a difference (RTL against
  cmodel, a replayed run against its recording).

Classes that callers have long caught as ``ValueError``/``KeyError``/``RuntimeError``
keep that base too (multiple inheritance).
"""

from __future__ import annotations


class AccelError(Exception):
    """Base of every error raised by the ``accel`` package."""


class AccelInputError(AccelError):
    """Input the accelerator side cannot use; the message names the file or value."""


class AccelCheckFailed(AccelError):
    """A check ran and did not pass (the message says what differed)."""
