"""Firmware: walk one DLA1 task's dependency graph and program the engines.

Mirrors NVDLA's firmware scheduler (sw kmd/firmware scheduler.c): it reads
the network descriptor at task address-list entry 0, then the dependency
graph, operation list and surface list from DRAM, and runs the graph:

* each engine (CONV, SDP, ...) has two register groups (ping-pong); the next
  op of an engine is found through ``consumers[engine]`` of the previous one,
  starting at ``op_head[engine]``, and is *programmed* into a free group;
* programming an op sends OP_PROGRAMMED to its consumers, enabling it sends
  OP_ENABLED to its ``fused_parent``, completing it sends OP_COMPLETED; each
  event decrements the receiver's ``dependency_count``;
* an op is *enabled* once it is programmed and its count reaches zero.  For a
  fused conv->SDP pair this enables the downstream SDP before the conv;
* completion comes from the GLB interrupt status (CACC done for conv, SDP
  done, ...), which the firmware clears by writing the bits back.

CONV, SDP, PDP and CDP are programmed; BDMA and RUBIK raise
:class:`FirmwareError` naming the op index and type.  Engines with a
read DMA that not every op uses (PDP: only when its input is in memory; SDP:
only for an input in memory or operands from memory) keep a separate
register-group pointer for that DMA, which advances only with the ops that
run it.  A CDP or SDP op's LUT is read from the task's LUT list
and loaded when the op is programmed, unless the engine's LUT holds that table
already (the engine's op before it in the run loaded it); since the LUT RAM is shared by
both of its groups, an op whose table differs from the other group's waits
until that op completes (NVIDIA's ``dla_cdp_is_ready`` / ``dla_sdp_is_ready``).
A fused pair names its upstream op as ``fused_parent``, which must be of the
previous engine type (CONV for SDP, SDP for PDP on the fly).

The first run of a task is recorded and later runs replay the recording while
its descriptors are unchanged (:mod:`accel.runtime.replay`), unless registers
are traced or logged (``trace`` / ``log_regs``), which needs every write made
by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from accel.config import HwConfig
from accel.loadable.containers import (
    OPERATION_CONTAINER_SIZE,
    SURFACE_CONTAINER_SIZE,
    decode_dep_graph,
    decode_op,
    decode_surface,
    op_name,
)
from accel.loadable.descriptors import (
    EVENT_OP_COMPLETED,
    EVENT_OP_ENABLED,
    EVENT_OP_PROGRAMMED,
    MEM_HW,
    OP_CDP,
    OP_CONV,
    OP_NUM,
    OP_PDP,
    OP_SDP,
    CommonOpDesc,
    NetworkDesc,
)
from accel.loadable.surfaces import INTERFACE_V12
from accel.regs import field_get, lookup
from accel.runtime import fw_cdp, fw_conv, fw_lut, fw_pdp, fw_sdp, replay
from accel.runtime.backend import Backend
from accel.runtime.errors import FirmwareError
from accel.runtime.regwriter import RegWriter

__all__ = ["Firmware", "FirmwareError"]

_STATUS = lookup("NVDLA_GLB.S_INTR_STATUS")
MAX_RECORDINGS = 4   # per task: one per engine state it starts from
MAX_DECODED = 8      # tasks whose decoded descriptors are kept


@dataclass(frozen=True)
class Engine:
    """How the firmware drives one engine type: the same small protocol for each.

    ``pointer_unit`` is the unit whose consumer pointer names the engine's next
    register group (for CONV the CACC, which raises its completion; all conv
    sub-units flip together); ``rdma_unit`` a read DMA whose group advances
    only with the ops that use it (``rdma_needed``); ``done_field`` the GLB
    interrupt field (``<field><group>``) of a completion; ``lut`` says its ops
    may load the engine's LUT, which both register groups share.
    """

    name: str
    pointer_unit: str
    rdma_unit: str | None
    done_field: str
    lut: bool
    set_producer: Callable[[RegWriter, _Op], None]
    program: Callable[[Firmware, _Op], None]
    enable: Callable[[RegWriter, _Op], None]
    rdma_needed: Callable[[_Op], bool] = lambda op: False


ENGINES: dict[int, Engine] = {
    OP_CONV: Engine(
        "CONV", "NVDLA_CACC", None, "CACC_DONE_STATUS", False,
        set_producer=lambda w, op: fw_conv.set_producer(w, op.group),
        program=lambda fw, op: fw_conv.program(fw.regs, fw.cfg, op.index, op.desc, op.surf,
                                               fw._address_of),
        enable=lambda w, op: fw_conv.enable(w)),
    OP_SDP: Engine(
        "SDP", "NVDLA_SDP", "NVDLA_SDP_RDMA", "SDP_DONE_STATUS", True,
        set_producer=lambda w, op: fw_sdp.set_producer(w, op.group, op.rdma_group),
        program=lambda fw, op: fw_sdp.program(fw.regs, op.index, op.desc, op.surf,
                                              fw._address_of, fw._lut_of(op),
                                              fw._loads_lut(op)),
        enable=lambda w, op: fw_sdp.enable(w, op.desc, op.surf),
        rdma_needed=lambda op: fw_sdp.rdma_needed(op.desc, op.surf)),
    OP_PDP: Engine(
        "PDP", "NVDLA_PDP", "NVDLA_PDP_RDMA", "PDP_DONE_STATUS", False,
        set_producer=lambda w, op: fw_pdp.set_producer(w, op.group, op.rdma_group),
        program=lambda fw, op: fw_pdp.program(fw.regs, op.index, op.desc, op.surf,
                                              fw._address_of),
        enable=lambda w, op: fw_pdp.enable(w, op.surf),
        rdma_needed=lambda op: fw_pdp.rdma_needed(op.surf)),
    OP_CDP: Engine(
        "CDP", "NVDLA_CDP", None, "CDP_DONE_STATUS", True,
        set_producer=lambda w, op: fw_cdp.set_producer(w, op.group),
        program=lambda fw, op: fw_cdp.program(fw.regs, op.index, op.desc, op.surf,
                                              fw._address_of, fw._lut_of(op),
                                              fw._loads_lut(op)),
        enable=lambda w, op: fw_cdp.enable(w)),
}
SUPPORTED = tuple(ENGINES)


def _done_bit(op_type: int, group: int) -> int:
    return _STATUS.field(f"{ENGINES[op_type].done_field}{group}").mask


@dataclass
class _Op:
    index: int
    common: CommonOpDesc
    desc: object
    surf: object
    deps: int
    group: int | None = None
    rdma_group: int | None = None
    programmed: bool = False
    enabled: bool = False
    completed: bool = False


@dataclass
class Firmware:
    """Executes DLA1 tasks on a :class:`Backend`.

    ``events`` describes the last run (program / enable / complete per op);
    ``trace`` prints every register write, ``log_regs`` keeps them in
    ``regs.log``.
    """

    cfg: HwConfig
    backend: Backend
    interface_version: tuple[int, int, int] = INTERFACE_V12
    trace: bool = False
    log_regs: bool = False

    def __post_init__(self) -> None:
        #: the last run's events, or a replayed recording's as one string (split when read)
        self._events: list[str] | str = []
        self.regs = RegWriter(self.backend, self.trace, keep_log=self.log_regs)
        self._io = self.backend          # the backend, or the recorder in front of it
        self._recordings: dict[tuple[int, ...], list[replay.Recording]] = {}
        #: decoded descriptors by the bytes they were decoded from, while tasks still run
        #: in full: a task's full runs from its other starting states (see :meth:`run`)
        #: decode the same bytes again, a quarter of such a run; dropped at the first replay
        self._decoded: dict[tuple[bytes, ...], list[tuple]] = {}
        #: how tasks ran: "full" (decoding descriptors; recorded when possible) or "replayed"
        self.run_counts = {"full": 0, "replayed": 0}
        # called with an op's index when its completion is taken, before anything that
        # depends on it starts: a debugger's view of memory after each op
        self.on_complete: Callable[[int], None] | None = None
        # The hardware consumes register groups alternately (each completion
        # flips the unit's consumer pointer), so the group an engine programs
        # next is state that outlives one task; run() re-reads it from the
        # hardware, since another Firmware (an earlier loadable on the same
        # device) may have used the engine since.
        self._next_group = [0] * OP_NUM
        self._next_rdma_group = [0] * OP_NUM

    @property
    def events(self) -> list[str]:
        """The last run's program / enable / complete lines, one per op and step."""
        if isinstance(self._events, str):
            self._events = self._events.split("\n") if self._events else []
        return self._events

    # ------------------------------------------------------------ descriptors
    def _read(self, addresses: list[int], index: int, size: int, what: str) -> bytes:
        if not 0 <= index < len(addresses):
            raise FirmwareError(f"{what}: address-list index {index} outside the task's "
                                f"{len(addresses)} addresses")
        return self._io.read_mem(addresses[index], size).tobytes()

    def load(self, addresses: list[int]) -> tuple[NetworkDesc, list[_Op]]:
        """Read the network descriptor and every op of a task from DRAM."""
        net = NetworkDesc.unpack(self._read(addresses, 0, NetworkDesc.SIZE, "network desc"))
        n = net.num_operations
        dep = self._read(addresses, net.dependency_graph_index, n * CommonOpDesc.SIZE, "dep graph")
        ops_blob = self._read(addresses, net.operation_desc_index, n * OPERATION_CONTAINER_SIZE,
                              "operation list")
        surf_blob = self._read(addresses, net.surface_desc_index, n * SURFACE_CONTAINER_SIZE,
                               "surface list")
        key = (dep, ops_blob, surf_blob)
        decoded = self._decoded.get(key)
        if decoded is None:
            decoded = []
            for i, common in enumerate(decode_dep_graph(dep, n)):
                if common.op_type not in SUPPORTED:
                    raise FirmwareError(f"op {i}: engine type {common.op_type} "
                                        f"({op_name(common.op_type)}) is not supported by "
                                        f"the firmware yet (supported: "
                                        f"{', '.join(op_name(t) for t in SUPPORTED)})")
                decoded.append((common, decode_op(common.op_type, ops_blob, i),
                                decode_surface(common.op_type, surf_blob, i,
                                               self.interface_version)))
            if len(self._decoded) >= MAX_DECODED:
                self._decoded.clear()
            self._decoded[key] = decoded
        # the descriptors are read, never written: each run gets its own op states
        return net, [_Op(i, common, desc, surf, common.dependency_count)
                     for i, (common, desc, surf) in enumerate(decoded)]

    # ---------------------------------------------------------------- running
    def run(self, addresses: list[int]) -> None:
        """Run one task whose address list resolves to absolute ``addresses``: replay a
        recorded run that is still valid, else run (and record) it in full.

        A task that leaves an engine's group pointers elsewhere than it found
        them starts the next run from another state (an odd number of convolutions
        flips the CACC's): each starting state gets its own recording.
        """
        key = tuple(addresses)
        recs = self._recordings.setdefault(key, [])
        for rec in list(recs):
            if not replay.still_valid(self.backend, rec):
                continue
            if self._replay(rec, recs):
                self.run_counts["replayed"] += 1
                self._decoded.clear()
                return
            recs.remove(rec)
        self.run_counts["full"] += 1
        if self.trace or self.log_regs or not replay.can_replay(self.backend):
            self._run(addresses)
            return
        recorder = replay.Recorder(self.backend)
        self._io = self.regs.backend = recorder
        try:
            self._run(addresses)
        finally:
            self._io = self.regs.backend = self.backend
        recorder.recording.fw_events = "\n".join(self.events)
        recs[:] = [r for r in recs if r.preamble() != recorder.recording.preamble()]
        recs.append(recorder.recording)
        del recs[:-MAX_RECORDINGS]

    def _replay(self, rec: replay.Recording, recs: list[replay.Recording]) -> bool:
        """Play ``rec``, one of the task's recordings ``recs``; False when the backend finds
        its state differs from the one the recording was prepared for (nothing has been
        written then)."""
        fast = getattr(self.backend, "replay", None)
        if fast is not None:
            if rec.prepared is None:
                siblings = [r.prepared for r in recs if r is not rec and r.prepared is not None
                            and replay.descriptors_unchanged(self.backend, r)]
                rec.prepared = self.backend.prepare_replay(rec.events, siblings)
                rec.compact()
            if not fast(rec.prepared, self.on_complete):
                return False
        else:
            replay.replay(self.backend, rec, self.on_complete)
        self._events = rec.fw_events
        return True

    def _run(self, addresses: list[int]) -> None:
        self._events = []
        net, ops = self.load(addresses)
        self._net = net
        self._addresses = addresses
        self._ops = ops
        # per engine: next op index to program (-1 when the chain is exhausted)
        self._next = {t: net.op_head[t] for t in range(OP_NUM)}
        self._busy: dict[int, dict[int, _Op]] = {t: {} for t in range(OP_NUM)}
        self._running: dict[int, _Op] = {}      # enabled, not yet completed, by index
        self._loaded_luts: dict[int, int] = {}  # engine -> the table its LUT holds
        self._left = len(ops)
        try:
            self._program_all()
        finally:    # the decoded descriptors serve this run only
            self._net = self._ops = None
            self._busy, self._running = {}, {}

    def _program_all(self) -> None:
        """Program, enable and complete every op of the loaded task."""
        ops = self._ops
        self._sync_groups()
        for t in range(OP_NUM):
            self._program_ready(t)
        while self._left:
            running = list(self._running.values())
            if not running:
                waiting = [f"{op.index}({op_name(op.common.op_type)}, deps={op.deps}, "
                           f"programmed={op.programmed})" for op in ops if not op.completed]
                raise FirmwareError(f"dependency deadlock: nothing running, waiting: "
                                    f"{', '.join(waiting)}")
            mask = 0
            for op in running:
                mask |= _done_bit(op.common.op_type, op.group)
            status = self._io.wait_interrupt(mask)
            self._io.write_reg(_STATUS.address, status)  # write-1-to-clear
            for op in running:
                if status & _done_bit(op.common.op_type, op.group):
                    self._complete(op)

    def _sync_groups(self) -> None:
        """Between tasks every engine is idle: its next op runs from the group its
        consumer pointer (``S_POINTER.CONSUMER``, read-only) names."""
        for t, engine in ENGINES.items():
            for unit, groups in ((engine.pointer_unit, self._next_group),
                                 (engine.rdma_unit, self._next_rdma_group)):
                if unit is not None:
                    value = self.regs.read(unit, "S_POINTER")
                    groups[t] = field_get(value, f"{unit}.S_POINTER", "CONSUMER")

    def _lut_blocked(self, engine: int, op: _Op, group: int) -> bool:
        """A CDP / SDP op whose LUT would overwrite the table of the op in the other group."""
        if not ENGINES[engine].lut:
            return False
        other = self._busy[engine].get(group ^ 1)
        return fw_cdp.lut_conflict(op.desc.lut_index,
                                   None if other is None else other.desc.lut_index,
                                   other is not None and other.enabled)

    def _program_ready(self, engine: int) -> None:
        """Program the engine's next ops while it has a free register group."""
        while self._next[engine] not in (-1, None) and len(self._busy[engine]) < 2:
            idx = self._next[engine]
            if not 0 <= idx < len(self._ops):
                raise FirmwareError(f"{op_name(engine)} chain points at op {idx}, outside the "
                                    f"{len(self._ops)} ops")
            op = self._ops[idx]
            if op.common.op_type != engine:
                raise FirmwareError(f"{op_name(engine)} chain reaches op {idx} of type "
                                    f"{op_name(op.common.op_type)}")
            group = self._next_group[engine]
            if group in self._busy[engine]:
                raise FirmwareError(f"{op_name(engine)} register group {group} is still busy "
                                    f"with op {self._busy[engine][group].index}")
            if self._lut_blocked(engine, op, group):
                self.events.append(f"wait {idx} {op_name(engine)} lut {op.desc.lut_index}")
                return  # retried when the other group's op completes
            self._next[engine] = op.common.consumers[engine].index
            self._next_group[engine] ^= 1
            self._busy[engine][group] = op
            op.group = group
            op.rdma_group = self._next_rdma_group[engine]
            if ENGINES[engine].rdma_needed(op):
                self._next_rdma_group[engine] ^= 1
            self._program(op)

    def _address_of(self, cube: object, what: str) -> int:
        if cube.type == MEM_HW or cube.address < 0:
            raise FirmwareError(f"{what} has no memory address (type {cube.type}, "
                                f"address index {cube.address})")
        if cube.address >= len(self._addresses):
            raise FirmwareError(f"{what}: address-list index {cube.address} outside the task's "
                                f"{len(self._addresses)} addresses")
        return self._addresses[cube.address] + cube.offset

    def _check_fused_parent(self, op: _Op) -> None:
        fp = op.common.fused_parent
        if fp.index < 0:
            return
        if not 0 <= fp.index < len(self._ops):
            raise FirmwareError(f"op {op.index}: fused_parent {fp.index} outside the "
                                f"{len(self._ops)} ops")
        t, parent = op.common.op_type, self._ops[fp.index].common.op_type
        if parent != t - 1:
            raise FirmwareError(f"op {op.index} ({op_name(t)}): fused_parent {fp.index} is "
                                f"{op_name(parent)}, expected {op_name(t - 1)}")

    def _loads_lut(self, op: _Op) -> bool:
        """Whether programming ``op`` loads its table into its unit's LUT: not when the
        op before it on that unit in this run loaded the same one (a task's LUT list
        holds each distinct table once, and only the firmware writes a LUT), as the
        depthwise blocks and row bands of one layer with a SiLU do; the first load of
        every run is made, so a run never depends on what an earlier one left."""
        if op.desc.lut_index < 0:
            return False
        unit = op.common.op_type
        if self._loaded_luts.get(unit) == op.desc.lut_index:
            self.events.append(f"lut {op.index} {op_name(unit)} {op.desc.lut_index} loaded")
            return False
        self._loaded_luts[unit] = op.desc.lut_index
        return True

    def _lut_of(self, op: _Op):
        if op.desc.lut_index < 0:
            return None
        net = self._net
        return fw_lut.read_lut(self._io.read_mem, self._addresses, net.lut_data_index,
                               net.num_luts, op.desc.lut_index,
                               f"{op_name(op.common.op_type).lower()} op {op.index}")

    def _program(self, op: _Op) -> None:
        t = op.common.op_type
        self.events.append(f"program {op.index} {op_name(t)} group {op.group}")
        self._check_fused_parent(op)
        engine = ENGINES[t]
        engine.set_producer(self.regs, op)
        engine.program(self, op)
        op.programmed = True
        self._notify(op, EVENT_OP_PROGRAMMED)
        self._try_enable(op)

    def _try_enable(self, op: _Op) -> None:
        if not op.programmed or op.enabled or op.deps > 0:
            return
        t = op.common.op_type
        self.events.append(f"enable {op.index} {op_name(t)}")
        op.enabled = True
        self._running[op.index] = op
        engine = ENGINES[t]
        engine.set_producer(self.regs, op)
        engine.enable(self.regs, op)
        # a fused SDP names its conv as fused_parent with OP_ENABLED: the conv
        # becomes enabled only after its downstream consumer is ready
        self._notify(op, EVENT_OP_ENABLED)

    def _notify(self, op: _Op, event: int) -> None:
        targets = [c.index for c in op.common.consumers if c.index >= 0 and c.event == event]
        fp = op.common.fused_parent
        if fp.index >= 0 and fp.event == event:
            targets.append(fp.index)
        for idx in targets:
            if not 0 <= idx < len(self._ops):
                raise FirmwareError(f"op {op.index} notifies op {idx}, outside the "
                                    f"{len(self._ops)} ops")
            dest = self._ops[idx]
            if dest.deps <= 0:
                raise FirmwareError(f"op {op.index} event {event} reaches op {idx} whose "
                                    f"dependency count is already 0")
            dest.deps -= 1
            self._try_enable(dest)

    def _complete(self, op: _Op) -> None:
        t = op.common.op_type
        self.events.append(f"complete {op.index} {op_name(t)}")
        if self._io is not self.backend:
            self._io.completed(op.index)
        if self.on_complete is not None:
            self.on_complete(op.index)
        op.completed = True
        del self._running[op.index]
        self._left -= 1
        del self._busy[t][op.group]
        self._notify(op, EVENT_OP_COMPLETED)
        self._program_ready(t)
