"""The cmodel's fast form of a recorded firmware run (:mod:`accel.runtime.replay`).

Most CSB writes of a task only store configuration: a ``D_`` register into the
group its unit's producer pointer selects, or an ``S_`` register.  The
pointers change only by the writes of the recording itself, so the store each
write reaches is known when the recording is prepared; a run of such writes
between two writes that act (an op enable, a pointer, the LUT port, GLB, BDMA)
becomes one ``dict.update`` per register group.  The writes that act still go
through :meth:`accel.cmod.dla.Dla.csb_write`, in their recorded order, so
operations start exactly when they did.

A write is a plain store when every field of its register is software
writable: the bits the write does not set are unused and stay zero, so the
stored value is ``value & writable_mask`` whatever the register held.  Other
registers (read-only fields the hardware sets) keep the masked
read-modify-write of the ordinary path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from accel.regs import by_address

_ACTING = {"D_OP_ENABLE", "S_POINTER", "S_LUT_ACCESS_DATA", "S_LUT_ACCESS_CFG"}
_ACTING_UNITS = {"NVDLA_GLB", "NVDLA_BDMA"}
BULK, WRITE, WAIT, CALL, READ = range(5)


class ReplayError(RuntimeError):
    """A recording the cmodel cannot prepare."""


@dataclass
class Prepared:
    """A recording as steps: ``(BULK, [(store, updates), ...])``, ``(WRITE, addr, value)``,
    ``(WAIT, mask, status)``, ``(CALL, index)``, ``(READ, addr, value)``."""

    steps: list[tuple] = field(default_factory=list)
    pointers: dict[str, int] = field(default_factory=dict)   # unit -> producer at the start


def _plain(reg) -> bool:
    return (reg.unit not in _ACTING_UNITS and reg.name not in _ACTING
            and all("w" in f.access for f in reg.fields))


def prepare(dla, events: list[tuple]) -> Prepared:
    """Turn recorded events (see :mod:`accel.runtime.replay`) into steps against ``dla``."""
    regs = dla.regs
    producer = {name: u.producer for name, u in regs.items()}
    out = Prepared(pointers=dict(producer))
    bulk: dict[int, tuple[dict, dict]] = {}
    started = False

    def flush() -> None:
        if bulk:
            out.steps.append((BULK, list(bulk.values())))
            bulk.clear()

    for ev in events:
        kind = ev[0]
        if kind == "r":
            if started:      # the reads before the first write are checked by the caller
                flush()
                out.steps.append((READ, ev[1], ev[2]))
            continue
        started = True
        if kind == "w":
            addr, value = ev[1], ev[2]
            reg = by_address(addr)
            if reg is None:
                raise ReplayError(f"recorded write to {addr:#x}, which is no register")
            unit = regs[reg.unit]
            if _plain(reg):
                store = unit.store_of(reg, producer[reg.unit])
                entry = bulk.setdefault(id(store), (store, {}))
                entry[1][reg.offset] = value & unit.write_mask(reg)
                continue
            flush()
            out.steps.append((WRITE, addr, value))
            if reg.name == "S_POINTER":
                producer[reg.unit] = value & 1
        elif kind == "i":
            flush()
            out.steps.append((WAIT, ev[1], ev[2]))
        elif kind == "c":
            flush()
            out.steps.append((CALL, ev[1]))
    flush()
    return out


def run(dla, prepared: Prepared, on_complete: Callable[[int], None] | None) -> bool:
    """Play ``prepared`` on ``dla`` (the one it was prepared against).  False, before
    anything is written, when a unit's producer pointer differs from the prepared one."""
    regs = dla.regs
    if any(regs[name].producer != p for name, p in prepared.pointers.items()):
        return False
    for step in prepared.steps:
        kind = step[0]
        if kind == BULK:
            for store, updates in step[1]:
                store.update(updates)
        elif kind == WRITE:
            dla.csb_write(step[1], step[2])
        elif kind == WAIT:
            status = dla.glb.status & step[1]
            if status != step[2]:
                from accel.runtime.replay import ReplayDiverged
                raise ReplayDiverged(f"interrupt wait on mask {step[1]:#x} found {status:#x}, "
                                     f"the recorded run {step[2]:#x}")
        elif kind == CALL:
            if on_complete is not None:
                on_complete(step[1])
        elif dla.csb_read(step[1]) != step[2]:
            from accel.runtime.replay import ReplayDiverged
            raise ReplayDiverged(f"register {step[1]:#x} reads {dla.csb_read(step[1]):#x}, the "
                                 f"recorded run {step[2]:#x}")
    return True
