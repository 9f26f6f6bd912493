"""Decode once, replay fast: a task's firmware run recorded and played back.

The firmware's work for one task - decoding descriptors, walking the
dependency graph, turning each op into register values - depends only on the
descriptors in DRAM and on the engines' state when the task starts.  The
first :meth:`~accel.runtime.firmware.Firmware.run` of a task goes through a
:class:`Recorder` that logs every register write and read, every interrupt
wait (with the bits it returned) and where the completion hook ran; later
runs replay that log.  A recording is reused only while:

* the backend is deterministic (``backend.deterministic``: the same writes
  give the same interrupts; the cmodel is, an RTL simulator need not be) and
  can tell whether memory changed (``backend.memory_version``);
* every DRAM region the firmware read (network, dependency graph, operation,
  surface and LUT lists) still has the version it had - a host or DMA write
  into descriptor memory invalidates the recording;
* the registers read before the first write (the engines' group pointers)
  hold the recorded values.

During a replay every interrupt wait must return the recorded bits; a
difference stops with :class:`ReplayDiverged` instead of programming on from a
wrong assumption.  A backend may run a recording its own faster way
(``prepare_replay`` / ``replay``, see :class:`accel.backends.cmod.CmodBackend`);
:func:`replay` is the plain loop every backend supports.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from accel.runtime.errors import RuntimeFault

WRITE, READ, WAIT, CALL = "w", "r", "i", "c"
_KINDS = (WRITE, READ, WAIT, CALL)
_CODES = {kind: code for code, kind in enumerate(_KINDS)}


class ReplayDiverged(RuntimeFault):
    """A replayed task saw other interrupts than the recorded run."""


class Events:
    """A recording's events, three 32-bit words each (kind, two operands): a large
    network's task makes over a hundred thousand of them, which as tuples of Python
    ints take ten times the memory.  Iterating gives the tuples ``(WRITE, addr, value)``,
    ``(READ, addr, value)``, ``(WAIT, mask, status)`` and ``(CALL, index)``."""

    __slots__ = ("_words",)

    def __init__(self) -> None:
        self._words = array("I")

    def append(self, kind: str, a: int, b: int = 0) -> None:
        self._words.extend((_CODES[kind], a, b))

    def __len__(self) -> int:
        return len(self._words) // 3

    def __iter__(self) -> Iterator[tuple]:
        words = self._words
        for i in range(0, len(words), 3):
            kind = _KINDS[words[i]]
            yield (kind, words[i + 1]) if kind == CALL else (kind, words[i + 1], words[i + 2])

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` events."""
        del self._words[3 * n:]


@dataclass
class Recording:
    """The backend interaction of one task's firmware run (see the module docstring)."""

    events: Events = field(default_factory=Events)
    versions: dict[int, int] = field(default_factory=dict)   # read address -> region version
    fw_events: str = ""          # the firmware's events log, one event per line
    prepared: Any = None          # the backend's own form, from prepare_replay

    def preamble(self) -> list[tuple[int, int]]:
        """``(address, value)`` of the register reads before the first write."""
        out = []
        for ev in self.events:
            if ev[0] != READ:
                break
            out.append((ev[1], ev[2]))
        return out

    def compact(self) -> None:
        """Keep of the events only the preamble, once a backend has prepared its own form
        (:attr:`prepared`) and replays that."""
        self.events.truncate(len(self.preamble()))


class Recorder:
    """A backend proxy that forwards everything and logs the firmware's side of it."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.recording = Recording()
        self._log = self.recording.events.append
        self._version = getattr(backend, "memory_version", None)

    @property
    def name(self) -> str:
        return self.backend.name

    def write_reg(self, addr: int, value: int) -> None:
        self._log(WRITE, addr, value & 0xFFFFFFFF)
        self.backend.write_reg(addr, value)

    def read_reg(self, addr: int) -> int:
        value = self.backend.read_reg(addr)
        self._log(READ, addr, value)
        return value

    def wait_interrupt(self, mask: int) -> int:
        status = self.backend.wait_interrupt(mask)
        self._log(WAIT, mask, status)
        return status

    def read_mem(self, addr: int, size: int):
        if self._version is not None:
            self.recording.versions.setdefault(addr, self._version(addr))
        return self.backend.read_mem(addr, size)

    def completed(self, index: int) -> None:
        """Mark where the firmware took op ``index``'s completion (the hook's place)."""
        self._log(CALL, index)

    def __getattr__(self, name: str) -> Any:      # map_memory, write_mem, stats, ...
        return getattr(self.backend, name)


def can_replay(backend: Any) -> bool:
    return bool(getattr(backend, "deterministic", False)) and callable(
        getattr(backend, "memory_version", None))


def descriptors_unchanged(backend: Any, rec: Recording) -> bool:
    """No DRAM region the recorded run read has been written since."""
    version = backend.memory_version
    return all(version(addr) == v for addr, v in rec.versions.items())


def still_valid(backend: Any, rec: Recording) -> bool:
    """The descriptors are unchanged and the engines start from the recorded state."""
    return descriptors_unchanged(backend, rec) and all(
        backend.read_reg(addr) == value for addr, value in rec.preamble())


def replay(backend: Any, rec: Recording, on_complete: Callable[[int], None] | None) -> None:
    """Play ``rec`` on any backend, one call per event (the preamble already checked)."""
    for ev in rec.events:
        kind = ev[0]
        if kind == WRITE:
            backend.write_reg(ev[1], ev[2])
        elif kind == WAIT:
            status = backend.wait_interrupt(ev[1])
            if status != ev[2]:
                raise ReplayDiverged(f"interrupt wait on mask {ev[1]:#x} returned {status:#x}, "
                                     f"the recorded run {ev[2]:#x}")
        elif kind == CALL and on_complete is not None:
            on_complete(ev[1])
