"""The cmodel's fast form of a recorded firmware run (:mod:`accel.runtime.replay`).

A plain model (``Dla(fast=False)``) takes no replays: :func:`prepare` gives None and
:func:`run` False, so the firmware programs every register again.

Most CSB writes of a task only store configuration: a ``D_`` register into the
group its unit's producer pointer selects, or an ``S_`` register.  The
pointers change only by the writes of the recording itself, so the store each
write reaches is known when the recording is prepared; a run of such writes
between two writes that act (an op enable, a pointer, the LUT port, GLB, BDMA)
becomes one update per register group.  The writes that act still go
through :meth:`accel.cmod.dla.Dla.csb_write`, in their recorded order, so
operations start exactly when they did.

A write is a plain store when every field of its register is software
writable: the bits the write does not set are unused and stay zero, so the
stored value is ``value & writable_mask`` whatever the register held.  Other
registers (read-only fields the hardware sets) keep the masked
read-modify-write of the ordinary path.

The first run of a prepared recording also *learns* what each op enable did
(:func:`_learn`): an enable that started a pipeline becomes a store followed by
:meth:`accel.cmod.dla.Dla.launch` of the very op it started, one that did not
becomes a store, and a pointer write becomes a masked store (it keeps the
consumer pointer).  Later runs play the learned steps, with no CSB decoding, no
readiness checks and no plan lookups.  What the learned launches read beyond
the recording's own writes is checked before each learned run
(:attr:`Learned.inherited`: configuration registers the recording leaves as it
found them; :attr:`Learned.start`: every op enable bit and consumer pointer);
if any differs, the run takes the unlearned steps, which decide everything
again.  A learned run without a completion hook (nothing looks at memory
between two ops) plays :attr:`Learned.fast`: runs of independent convolutions
computed together (:mod:`accel.cmod.fast.batch`), stores merged into bulk updates
(a pointer write with the consumer it found when learned, which the same start
makes the same) without the stores of a value the register already holds.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from accel.cmod.fast import batch
from accel.cmod.lut import access_entries
from accel.cmod.pipeline import CONV_UNITS
from accel.errors import AccelCheckFailed, AccelError
from accel.regs import by_address, lookup

_ACTING = {"D_OP_ENABLE", "S_POINTER", "S_LUT_ACCESS_DATA", "S_LUT_ACCESS_CFG"}
#: GLB's interrupt status: a write clears the bits it sets (:meth:`accel.cmod.glb.Glb.clear`)
_INTR_STATUS = lookup("NVDLA_GLB.S_INTR_STATUS").address
_ACTING_UNITS = {"NVDLA_GLB", "NVDLA_BDMA"}
BULK, WRITE, WAIT, CALL, READ, STORE, LAUNCH, BATCH, DONE, SPAN, MERGED, CLEAR, LUT = range(13)

#: units whose op enables a learned replay resolves (the conv/SDP/PDP pipelines and the
#: CDP; Rubik and BDMA keep their writes)
_LEARNED_UNITS = CONV_UNITS + ("NVDLA_SDP", "NVDLA_SDP_RDMA", "NVDLA_PDP", "NVDLA_PDP_RDMA",
                               "NVDLA_CDP", "NVDLA_CDP_RDMA")


class ReplayError(AccelError, RuntimeError):
    """A recording the cmodel cannot prepare."""


class ReplayDiverged(ReplayError, AccelCheckFailed):
    """A learned replay saw other interrupts or register values than its recorded run
    (a check that failed, as the runtime's own :class:`accel.runtime.replay.ReplayDiverged`
    is)."""


class Interned:
    """One object per distinct content among the structures of a task's recordings.

    A task that leaves a group pointer flipped is recorded once per starting state
    (see :meth:`accel.runtime.firmware.Firmware.run`): the recordings store the same
    values into the other group of each register, so their prepared value tuples,
    merged stores and span effects have the same contents, a megabyte or more for a
    large network.  The recordings of a task share one table while any of them is
    still learning (:attr:`Prepared.interned`, :attr:`Span.interned`), and so one
    object for each; the table goes with the last of them to finish.
    """

    def __init__(self) -> None:
        self._objects: dict = {}
        self._dicts: dict[int, list[dict]] = {}

    def get(self, obj):
        """The table's object equal to the hashable ``obj`` (``obj`` itself if new)."""
        return self._objects.setdefault(obj, obj)

    def dict(self, d: dict) -> dict:
        """The table's dict equal to ``d`` with its items in the same order (``d`` itself
        if new; the recordings make theirs in the same order); nothing mutates them."""
        bucket = self._dicts.setdefault(hash(tuple(d.items())), [])
        for other in bucket:
            if other == d:
                return other
        bucket.append(d)
        return d


@dataclass
class Learned:
    """Steps with the op enables resolved (see the module docstring): the steps of
    :class:`Prepared` plus ``(STORE, store, offset, keep, bits, left)`` (a masked store,
    with the value it left when learned) and ``(LAUNCH, store, offset, keep, bits,
    launch)`` (a store, then ``dla.launch``)."""

    steps: list[tuple]
    #: ``(store, offset, value)`` the launches read and the recording does not write
    inherited: list[tuple[dict, int, int]]
    #: the learned units at the start (:func:`_start`)
    start: tuple[int, ...]
    #: the steps of a run without a completion hook (:func:`_fast`): runs of independent
    #: convolutions computed together (:func:`accel.cmod.fast.batch.batches`: ``(BATCH, batch)``
    #: before the first of a run, ``(DONE, store, offset, keep, bits, launch, batch, i)``
    #: in place of its launches), stores merged, completion marks dropped, writes that clear
    #: GLB's interrupt status ``(CLEAR, bits)``
    fast: list[tuple] | None = None


@dataclass
class Prepared:
    """A recording as steps: ``(BULK, ((store, offsets, values), ...))`` (register
    stores, offsets and values as tuples: the prepared steps of a network take megabytes,
    and are played once to learn, then only when the learned steps cannot be),
    ``(WRITE, addr, value)``, ``(LUT, unit, entries)`` (consecutive writes of a unit's
    ``S_LUT_ACCESS_DATA``: a table loaded entry by entry, as one block of the entries they
    store), ``(WAIT, mask,
    status)``, ``(CALL, index)``, ``(READ, addr, value)``."""

    steps: list[tuple] = field(default_factory=list)
    pointers: dict[str, int] = field(default_factory=dict)   # unit -> producer at the start
    learned: Learned | None = None    # after the first run (see :func:`_learn`)
    #: shared with the task's other recordings until this one and its spans have learned
    #: (runs with a completion hook never play the spans: such a recording keeps it)
    interned: Interned | None = None
    #: runs by kind: "learning" (the first), "learned" (the fast steps) and "unlearned"
    #: (the prepared steps, when the learned ones' state did not hold)
    runs: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("learning", "learned", "unlearned"), 0))


def _writable(reg) -> bool:
    """Every field of ``reg`` is software writable: a write leaves nothing of the old
    value (the bits it does not set are unused and stay zero)."""
    return all("w" in f.access for f in reg.fields)


def _plain(reg) -> bool:
    return reg.unit not in _ACTING_UNITS and reg.name not in _ACTING and _writable(reg)


def prepare(dla, events: Iterable[tuple], siblings: Iterable[Prepared] = ()
            ) -> Prepared | None:
    """Turn recorded events (see :mod:`accel.runtime.replay`) into steps against ``dla``,
    sharing objects with the still learning ``siblings`` (the task's other recordings,
    see :class:`Interned`); None for a plain ``dla`` (without its speed layer)."""
    if dla.fast is None:
        return None
    regs = dla.regs
    producer = {name: u.producer for name, u in regs.items()}
    interned = next((p.interned for p in siblings if p.interned is not None), Interned())
    out = Prepared(pointers=dict(producer), interned=interned)
    bulk: dict[int, tuple[dict, dict]] = {}
    started = False
    #: one object per distinct step, value or tuple of them: tens of thousands of
    #: pointer writes and register values repeat a few hundred distinct ones
    share = interned.get

    def flush() -> None:
        if bulk:
            parts = []
            for store, updates in bulk.values():
                offsets, values = tuple(updates), tuple(updates.values())
                parts.append((store, share(offsets), share(values)))
            out.steps.append((BULK, tuple(parts)))
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
                value &= unit.write_mask(reg)
                entry[1][reg.offset] = share(value)
                continue
            flush()
            if reg.name == "S_LUT_ACCESS_DATA":      # a table's entries, one after another
                last = out.steps[-1] if out.steps else None
                if last is not None and last[0] == LUT and last[1] == reg.unit:
                    last[2].append(value)
                else:
                    out.steps.append((LUT, reg.unit, [value]))
                continue
            out.steps.append(share((WRITE, addr, value)))
            if reg.name == "S_POINTER":
                producer[reg.unit] = value & 1
        elif kind == "i":
            flush()
            out.steps.append(share((WAIT, ev[1], ev[2])))
        elif kind == "c":
            flush()
            out.steps.append(share((CALL, ev[1])))
    flush()
    out.steps = [(LUT, step[1], _entries(step[2])) if step[0] == LUT else step
                 for step in out.steps]
    return out


def _entries(values: list[int]) -> np.ndarray:
    """The LUT entries ``values`` write (:func:`accel.cmod.lut.access_entries`), read-only:
    decoded once per recording, written into the table at every play."""
    entries = access_entries(values)
    entries.flags.writeable = False
    return entries


def _start(dla) -> tuple[int, ...]:
    """What the learned steps assume of the learned units when they start: the op enable
    bit of both groups and the consumer pointer of each unit.  From the same start the
    same launches complete in the same order, so every consumer pointer along the run
    is the learned one too."""
    out = []
    for name in _LEARNED_UNITS:
        regs = dla.regs[name]
        off = regs.unit.registers["D_OP_ENABLE"].offset
        out += [regs.groups[0][off] & 1, regs.groups[1][off] & 1, regs.consumer]
    return tuple(out)


def run(dla, prepared: Prepared | None, on_complete: Callable[[int], None] | None) -> bool:
    """Play ``prepared`` on ``dla`` (the one it was prepared against).  False, before
    anything is written, when a unit's producer pointer differs from the prepared one,
    or when there is nothing prepared (a plain ``dla``, see :func:`prepare`).

    The first run learns (:func:`_learn`); later runs play the learned steps when the
    state they depend on is the learned one, else the prepared steps."""
    regs = dla.regs
    if prepared is None or any(regs[name].producer != p
                               for name, p in prepared.pointers.items()):
        return False
    learned = prepared.learned
    if learned is None:
        prepared.runs["learning"] += 1
        prepared.learned = _learn(dla, prepared, on_complete)
    elif (_start(dla) != learned.start
            or any(store[off] != value for store, off, value in learned.inherited)):
        prepared.runs["unlearned"] += 1
        _play(dla, prepared.steps, on_complete)
    else:
        prepared.runs["learned"] += 1
        steps = learned.fast if on_complete is None else learned.steps
        with _collector_paused():
            _play(dla, steps, on_complete)
    # learned, spans too (only runs without a hook play them): nothing more to share
    if prepared.interned is not None and on_complete is None and all(
            step[1].effect is not None for step in prepared.learned.fast if step[0] == SPAN):
        prepared.interned = None
    return True


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the duration: a learned run allocates many small
    short-lived objects (records, tuples), which set off collections that walk every
    tracked object of the process - the prepared steps of every loaded task among them
    - while none of it is cyclic garbage.  Reference counting still frees everything;
    a collection due meanwhile runs at the next allocation after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _play(dla, steps: list[tuple], on_complete: Callable[[int], None] | None) -> None:
    glb = dla.glb
    for step in steps:
        kind = step[0]
        if kind == MERGED:
            for store, updates in step[1]:
                store.update(updates)
            for store, off, value in step[2]:
                store[off] = value
        elif kind == LAUNCH:
            _, store, off, keep, bits, launch = step
            store[off] = (store[off] & keep) | bits
            dla.launch(launch)
        elif kind == WAIT:
            status = glb.status & step[1]
            if status != step[2]:
                raise ReplayDiverged(f"interrupt wait on mask {step[1]:#x} found {status:#x}, "
                                f"the recorded run {step[2]:#x}")
        elif kind == CLEAR:
            glb.clear(step[1])
        elif kind == BULK:
            for store, offsets, values in step[1]:
                store.update(zip(offsets, values, strict=True))
        elif kind == STORE:
            _, store, off, keep, bits, _left = step
            store[off] = (store[off] & keep) | bits
        elif kind == SPAN:
            step[1].play(dla)
        elif kind == BATCH:
            step[1].run(dla)
        elif kind == DONE:
            _, store, off, keep, bits, launch, conv_batch, i = step
            store[off] = (store[off] & keep) | bits
            dla.launch(launch, conv_batch.done(i))
        elif kind == WRITE:
            dla.csb_write(step[1], step[2])
        elif kind == LUT:
            dla.luts[step[1]].write_entries(step[2])
        elif kind == CALL:
            if on_complete is not None:
                on_complete(step[1])
        elif (value := dla.csb_read(step[1])) != step[2]:
            raise ReplayDiverged(f"register {step[1]:#x} reads {value:#x}, the recorded run "
                            f"{step[2]:#x}")


def _learn(dla, prepared: Prepared, on_complete: Callable[[int], None] | None) -> Learned:
    """Run the prepared steps on ``dla`` and resolve what each op enable and pointer
    write did; return the learned steps with the state they depend on."""
    regs = dla.regs
    start = _start(dla)
    learned: list[tuple] = []
    #: one STORE step per distinct content: a pointer write repeats for every op
    stores: dict[tuple, tuple] = {}
    written: set[tuple[int, int]] = set()      # (id(store), offset) the recording has set
    inherited: dict[tuple[int, int], tuple[dict, int, int]] = {}
    for step in prepared.steps:
        kind = step[0]
        if kind == BULK:
            for store, offsets, _values in step[1]:
                written.update((id(store), off) for off in offsets)
        if kind != WRITE:
            _play(dla, [step], on_complete)
            learned.append(step)
            continue
        addr, value = step[1], step[2]
        reg = by_address(addr)
        if reg.unit not in _LEARNED_UNITS or reg.name not in ("D_OP_ENABLE", "S_POINTER"):
            _play(dla, [step], on_complete)
            learned.append(step)
            continue
        unit = regs[reg.unit]
        store = unit.store_of(reg, unit.producer)
        mask = unit.write_mask(reg)
        consumers = {name: regs[name].consumer for name in _LEARNED_UNITS}
        dla.launched, n_stats = None, len(dla.stats)
        dla.csb_write(addr, value)
        written.add((id(store), reg.offset))
        # an op enable replaces its register (then merged with the plain stores around it
        # by _fast); a pointer write keeps the consumer the hardware sets
        keep = 0 if _writable(reg) else ~mask & 0xFFFFFFFF
        store_step = (store, reg.offset, keep, value & mask)
        launch = dla.launched
        if launch is None:
            if len(dla.stats) != n_stats:   # something ran that cannot be replayed as a launch
                learned.append(step)
            else:
                left = store[reg.offset]
                key = (id(store), reg.offset, keep, value & mask, left)
                learned.append(stores.setdefault(key, (STORE, *store_step, left)))
            continue
        learned.append((LAUNCH, *store_step, launch))
        for name in launch.units():   # the groups it ran from
            u = regs[name]
            g = u.groups[consumers[name]]
            for off in u.config_offsets:
                key = (id(g), off)
                if key not in written and key not in inherited:
                    inherited[key] = (g, off, g[off])
    return Learned(learned, list(inherited.values()), start,
                   _fast(dla, learned, prepared.interned or Interned()))


def _fast(dla, steps: list[tuple], interned: Interned) -> list[tuple]:
    """The learned ``steps`` for a run without a completion hook on ``dla``: CALL marks
    dropped, runs of independent convolutions batched (unless ``dla.fast.batch_convs`` is
    off), each batch's steps one :class:`Span`, and the stores between spans merged into
    one bulk update per run of them (:func:`_merged`), each store as the value it left
    when learned (a pointer's consumer bit included: the same start gives the same
    consumers, see :func:`_start`), and each write to GLB's interrupt status a direct
    clear of its bits, without the CSB decoding.

    A span keeps the learned step tuples themselves, unmerged: it plays them once, to
    learn its effect, and again only when that does not hold, so merged copies of its
    configuration would be memory spent for nothing.  The merged stores and the spans'
    effects are taken from ``interned`` where another recording has the same."""
    out = [step for step in steps if step[0] != CALL]
    if dla.fast.batch_convs:
        batched = batch.batches(out, dla.cfg.atom_size,
                                {"LAUNCH": LAUNCH, "BATCH": BATCH, "DONE": DONE}, _quiet)
        if batched is not None:
            out = _spans(batched, interned)
    return [(CLEAR, step[2]) if step[0] == WRITE and step[1] == _INTR_STATUS else step
            for step in _merged(out, _settled(dla), interned)]


def _merged(steps: list[tuple], settled: dict[int, frozenset[int]],
            interned: Interned) -> list[tuple]:
    """``steps`` with each run of BULK and STORE steps made one ``(MERGED, [(store,
    {offset: value}), ...], [(store, offset, value), ...])`` (see :func:`_fast`): the
    registers of a store written together, a store's single register (a pointer, most
    often) on its own; leaving out a store of the value its register already holds.

    What a register holds is known from the run's own earlier stores, for the registers
    of ``settled`` (id of a register group -> the offsets nothing but software writes).
    A span or a CSB write other than to GLB forgets all of it; a span gets the MERGED
    steps since the last such point (:attr:`Span.stored`)."""
    out: list[tuple] = []
    bulk: dict[int, tuple[dict, dict]] = {}
    known: dict[tuple[int, int], int] = {}
    stored: list[tuple] = []          # the MERGED steps since known was last cleared
    singles: dict[tuple[int, int, int], tuple[dict, int, int]] = {}   # one of each

    def put(store: dict, off: int, value: int) -> None:
        key = (id(store), off)
        if key in known and known[key] == value:
            return
        if off in settled.get(id(store), ()):
            known[key] = value
        bulk.setdefault(id(store), (store, {}))[1][off] = value

    def flush() -> None:
        if bulk:
            several, one = [], []
            for store, updates in bulk.values():
                if len(updates) > 1:
                    several.append((store, interned.dict(updates)))
                    continue
                ((off, value),) = updates.items()
                one.append(singles.setdefault((id(store), off, value), (store, off, value)))
            out.append((MERGED, several, one))
            stored.append(out[-1])
            bulk.clear()

    for step in steps:
        kind = step[0]
        if kind == BULK:
            for store, offsets, values in step[1]:
                for off, value in zip(offsets, values, strict=True):
                    put(store, off, value)
        elif kind == STORE:
            put(step[1], step[2], step[5])
        else:
            flush()
            out.append(step)
            if kind == SPAN or (kind == WRITE and by_address(step[1]).unit != "NVDLA_GLB"):
                if kind == SPAN:
                    step[1].stored = stored
                known.clear()
                stored = []
    flush()
    return out


def _settled(dla) -> dict[int, frozenset[int]]:
    """The registers of each register group that only software writes: its
    configuration, op enable aside (an op's completion clears it)."""
    out = {}
    for regs in dla.regs.values():
        enable = regs.unit.registers.get("D_OP_ENABLE")
        offsets = frozenset(regs.config_offsets) - {enable.offset if enable else None}
        for group in regs.groups:
            out[id(group)] = offsets
    return out


def _spans(steps: list[tuple], interned: Interned) -> list[tuple]:
    """``steps`` with each batch's steps, from its BATCH to its last DONE, made one
    ``(SPAN, Span)``; a batch whose steps read a register keeps them."""
    out: list[tuple] = []
    i = 0
    while i < len(steps):
        step = steps[i]
        if step[0] != BATCH:
            out.append(step)
            i += 1
            continue
        conv_batch, left, end = step[1], len(step[1]), i
        while left:
            end += 1
            if steps[end][0] == DONE and steps[end][-2] is conv_batch:
                left -= 1
        members = steps[i:end + 1]
        if any(s[0] == READ for s in members):
            out += members
        else:
            out.append((SPAN, Span(members, interned)))
        i = end + 1
    return out


class Span:
    """A batch's steps, from its :data:`BATCH` to its last :data:`DONE`, played as one.

    Between its launches a batch's steps only store configuration, wait for
    interrupts and clear them (see :mod:`accel.cmod.fast.batch`), and every launch
    completes the same way: what the steps leave in the registers is the same on
    every run, but for each launch's saturation counters.  The first play runs the
    steps and keeps that effect (:class:`_Effect`); later plays compute the batch,
    apply the effect (the counters from this run's data) and add the launches'
    records, as the steps would have.  A play whose registers the effect depends on
    differ from the first one's (a group pointer, GLB's interrupt status or mask, a
    register the steps only partly write) runs the steps instead.

    The steps may also load the CDP's table (:func:`_quiet`): its entries are no
    register, so those steps (:attr:`table_steps`) play again after the effect.

    :attr:`stored` (set by :func:`_merged`, kept until the effect is learned): the
    MERGED steps that every fast run plays between the last point that forgets what
    the registers hold and the span.  A register they store (one only software
    writes) holds that value whenever the span starts, so the effect leaves it out
    when the span leaves the same value there.
    """

    def __init__(self, steps: list[tuple], interned: Interned) -> None:
        self.steps = steps
        self.batch = steps[0][1]
        self.table_steps = [s for s in steps if s[0] == LUT or s[0] == WRITE
                            and _cdp_table_write(s)]
        self.effect: _Effect | None = None
        self.stored: list[tuple] = []
        self.interned: Interned | None = interned     # until the effect is learned
        self.plays = dict.fromkeys(("learning", "applied", "stepped"), 0)

    def known(self, dla) -> set[tuple[int, int]]:
        """``(id(store), offset)`` of the registers that hold, whenever the span starts,
        what :attr:`stored` stores there."""
        settled = _settled(dla)
        out = set()
        for step in self.stored:
            keys = [(store, off) for store, updates in step[1] for off in updates]
            keys += [(store, off) for store, off, _ in step[2]]
            out.update((id(store), off) for store, off in keys
                       if off in settled.get(id(store), ()))
        return out

    def play(self, dla) -> None:
        if self.effect is None:
            self.plays["learning"] += 1
            self.effect = _Effect.learn(dla, self.steps, self.known(dla), self.interned)
            self.stored, self.interned = [], None
        elif self.effect.holds():
            self.plays["applied"] += 1
            conv_batch = self.batch
            conv_batch.run(dla)
            self.effect.apply(dla, conv_batch)
            if self.table_steps:
                _play(dla, self.table_steps, None)
        else:
            self.plays["stepped"] += 1
            _play(dla, self.steps, None)


@dataclass
class _Effect:
    """What a :class:`Span`'s steps leave in the registers (see there)."""

    #: ``(store, {offset: value})``: every register the steps changed or wrote, the
    #: counters and the known ones aside
    updates: list[tuple[dict, dict]]
    #: ``(store, {offset: value})`` before the steps, of every register the effect
    #: depends on
    depends: list[tuple[dict, dict]]
    #: ``(store, offset, launch index, ConvDone field)``: the counters, each as its last
    #: launch set it
    counters: list[tuple[dict, int, int, str]]

    @classmethod
    def learn(cls, dla, steps: list[tuple], known: set[tuple[int, int]],
              interned: Interned) -> _Effect:
        """Play ``steps`` on ``dla`` and return their effect, leaving out a register of
        ``known`` (see :meth:`Span.known`) that they leave as they found it; a store's
        updates are ``interned``'s where another recording has the same."""
        stores = [st for regs in dla.regs.values() for st in regs.stores()]
        before = [dict(st) for st in stores]
        whole: dict[tuple[int, int], bool] = {}   # first software write replaces it all?
        counters: dict[tuple[int, int], tuple[dict, int, int, str]] = {}
        for step in steps:
            kind = step[0]
            if kind == BULK:
                for store, offsets, _values in step[1]:
                    for off in offsets:
                        whole.setdefault((id(store), off), True)
            elif kind in (STORE, DONE):
                whole.setdefault((id(step[1]), step[2]), step[3] == 0)
            if kind == DONE:
                for store, off, field_name in dla.conv_counters():
                    counters[(id(store), off)] = (store, off, step[-1], field_name)
            _play(dla, [step], None)
        # read by every completion and wait, whether or not the steps change them
        always = {(id(regs.stores()[0]), regs.pointer_offset) for regs in dla.regs.values()
                  if regs.pointer_offset is not None}
        always |= {(id(dla.glb.regs.stores()[0]), off) for off in dla.glb.regs.stores()[0]}
        updates, depends = [], []
        for store, old in zip(stores, before, strict=True):
            changed, found = {}, {}
            for off, value in store.items():
                key = (id(store), off)
                if key in counters:
                    continue
                touched = key in whole or old[off] != value
                if touched and (old[off] != value or key not in known):
                    changed[off] = value
                if key in always or (touched and not whole.get(key, False)):
                    found[off] = old[off]
            if changed:
                updates.append((store, interned.dict(changed)))
            if found:
                depends.append((store, interned.dict(found)))
        return cls(updates, depends, list(counters.values()))

    def holds(self) -> bool:
        """The registers the effect depends on hold what they held when it was learned."""
        for store, found in self.depends:
            for off, value in found.items():
                if store[off] != value:
                    return False
        return True

    def apply(self, dla, conv_batch) -> None:
        """Leave the registers as the steps would have after ``conv_batch`` ran."""
        for store, changed in self.updates:
            store.update(changed)
        saturations = conv_batch.saturations
        for store, off, i, field_name in self.counters:
            store[off] = saturations[field_name][i] & 0xFFFFFFFF
        dla.fast.batch_finished(conv_batch)
        dla.launched = conv_batch.launches[-1]


def _quiet(step: tuple) -> bool:
    """``step`` neither reads nor writes memory nor anything a convolution reads (a batch
    may compute across it): configuration, GLB, and the CDP's table, which the
    firmware may load while a layer's convolutions are still to run."""
    kind = step[0]
    if kind in (BULK, STORE, WAIT, CALL, READ):
        return True
    if kind == LUT:
        return step[1] == "NVDLA_CDP"
    if kind == WRITE:
        return _glb_write(step) or _cdp_table_write(step)
    return False


def _glb_write(step: tuple) -> bool:
    reg = by_address(step[1])
    return reg is not None and reg.unit == "NVDLA_GLB"


def _cdp_table_write(step: tuple) -> bool:
    """A write of the CDP's LUT access port (a table loaded entry by entry)."""
    reg = by_address(step[1])
    return reg is not None and reg.unit == "NVDLA_CDP" and reg.name.startswith("S_LUT_ACCESS")
