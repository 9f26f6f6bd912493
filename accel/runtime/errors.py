"""The runtime's errors: one base, so callers catch everything the runtime raises at once.

* :class:`FirmwareError` - a descriptor the firmware cannot program (names the
  op and the field);
* :class:`RuntimeUsageError` - misuse of the user-mode driver (nothing loaded,
  unknown tensor, wrong size);
* :class:`InterruptTimeout` - waiting for an interrupt no running op raises;
* :class:`~accel.runtime.replay.ReplayDiverged` - a replayed task saw other
  interrupts than its recorded run.
"""

from __future__ import annotations

from accel.errors import AccelError


class RuntimeFault(AccelError, RuntimeError):
    """Base of every error the runtime raises."""


class FirmwareError(RuntimeFault):
    """A task the firmware cannot run; the message names the op and what is wrong."""


class RuntimeUsageError(RuntimeFault):
    """Misuse of the runtime (unknown tensor, wrong size, nothing loaded)."""


class InterruptTimeout(RuntimeFault):
    """Waiting for interrupt bits that no running operation will ever raise."""
