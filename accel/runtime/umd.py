"""User-mode driver: load a loadable, place its memories, bind tensors, submit.

>>> from accel.config import get_preset
>>> from accel.backends import get_backend
>>> cfg = get_preset("nv_small")                      # doctest: +SKIP
>>> rt = Runtime(cfg, get_backend("cmod", cfg))       # doctest: +SKIP
>>> rt.load(open("CONV_D_L0_0_small_fbuf", "rb").read())   # doctest: +SKIP
>>> rt.submit(); out = rt.read_output(0)              # doctest: +SKIP

Every memory-list entry gets a region in the backend's DRAM, starting at
``dram_base`` and aligned to ``max(entry.alignment, MIN_ALIGN)``; SET entries
are filled from their blobs.  For each task the address list is turned into
absolute addresses (memory base + entry offset), as the KMD does before it
hands the task to the firmware.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.config import HwConfig
from accel.loadable.io import read_loadable
from accel.loadable.model import (
    BlobSubInterface,
    Interface,
    Loadable,
    MemoryFlags,
    MemoryListEntry,
    TensorDescListEntry,
)
from accel.loadable.surfaces import INTERFACE_V12
from accel.runtime.backend import Backend
from accel.runtime.errors import RuntimeUsageError
from accel.runtime.firmware import Firmware

DRAM_BASE = 0x8000_0000
MIN_ALIGN = 4096  # one page per memory, as the KMD's DMA buffers
#: the most DLA memory a loadable may ask for: the 32-bit DMA address space above DRAM_BASE
MAX_MEMORY = 1 << 31


@dataclass
class Binding:
    """A bindable tensor: its memory, tensor description and DRAM address."""

    memory: MemoryListEntry
    tensor: TensorDescListEntry | None
    address: int

    @property
    def name(self) -> str:
        return self.tensor.name if self.tensor else f"mem{self.memory.id}"

    @property
    def size(self) -> int:
        return self.tensor.size if self.tensor and self.tensor.size else self.memory.size


class Runtime:
    """Runs loadables on one backend; see the module docstring."""

    def __init__(self, cfg: HwConfig, backend: Backend, dram_base: int = DRAM_BASE,
                 trace_regs: bool = False, log_regs: bool = False) -> None:
        self.cfg = cfg
        self.backend = backend
        self.dram_base = dram_base
        self.trace_regs = trace_regs
        self.log_regs = log_regs
        self.loadable: Loadable | None = None
        self.mem_address: dict[int, int] = {}
        self.firmware: Firmware | None = None

    # ---------------------------------------------------------------- loading
    def load(self, loadable: Loadable | bytes) -> None:
        """Allocate every memory of ``loadable`` and fill the SET ones from blobs."""
        if not isinstance(loadable, Loadable):
            loadable = read_loadable(loadable)
        total = sum(max(m.size, 1) + max(m.alignment, MIN_ALIGN) for m in loadable.memory_list)
        if total > MAX_MEMORY:
            raise RuntimeUsageError(f"the loadable asks for {total:,} bytes of DLA memory in "
                                    f"{len(loadable.memory_list)} memories; at most "
                                    f"{MAX_MEMORY:,} fit the DLA's address space")
        self.loadable = loadable
        self.mem_address = {}
        cursor = self.dram_base
        for mem in loadable.memory_list:
            align = max(mem.alignment, MIN_ALIGN)
            cursor = -(-cursor // align) * align
            self.mem_address[mem.id] = cursor
            self.backend.map_memory(cursor, max(mem.size, 1), f"mem{mem.id}")
            if mem.flags & MemoryFlags.SET:
                if len(mem.offsets) not in (0, len(mem.contents)):
                    raise RuntimeUsageError(f"memory {mem.id}: {len(mem.contents)} contents "
                                            f"but {len(mem.offsets)} offsets")
                for k, name in enumerate(mem.contents):
                    if not name:
                        continue
                    off = mem.offsets[k] if mem.offsets else 0
                    data = loadable.blob(name).data
                    if off + len(data) > mem.size:
                        raise RuntimeUsageError(
                            f"blob {name!r} ({len(data)} bytes at offset {off}) overflows "
                            f"memory {mem.id} of {mem.size} bytes")
                    self.backend.write_mem(cursor + off, data)
            cursor += mem.size
        self.firmware = Firmware(self.cfg, self.backend, self._interface_version(),
                                 trace=self.trace_regs, log_regs=self.log_regs)

    def _interface_version(self) -> tuple[int, int, int]:
        """Firmware interface of the DLA1 descriptor blobs (their Blob.version)."""
        assert self.loadable is not None
        for b in self.loadable.blobs:
            if b.sub_interface == BlobSubInterface.SURF_LIST and b.version != (0, 0, 0):
                return b.version
        return INTERFACE_V12

    # ---------------------------------------------------------------- binding
    def _bindings(self, flag: MemoryFlags) -> list[Binding]:
        if self.loadable is None:
            raise RuntimeUsageError("no loadable loaded; call load() first")
        return [Binding(m, t, self.mem_address[m.id]) for m, t in self.loadable.tensors(flag)]

    @property
    def inputs(self) -> list[Binding]:
        return self._bindings(MemoryFlags.INPUT)

    @property
    def outputs(self) -> list[Binding]:
        return self._bindings(MemoryFlags.OUTPUT)

    def _find(self, key: int | str, flag: MemoryFlags) -> Binding:
        kind = "input" if flag == MemoryFlags.INPUT else "output"
        items = self._bindings(flag)
        for b in items:
            if (isinstance(key, int) and b.memory.bind_id == key) or key == b.name:
                return b
        have = ", ".join(f"{b.memory.bind_id}:{b.name}" for b in items) or "none"
        raise KeyError(f"{kind} {key!r} not in loadable ({kind}s: {have})")

    def bind_input(self, key: int | str, data: bytes | np.ndarray) -> None:
        """Write raw surface bytes of input ``key`` (bind id or tensor name)."""
        b = self._find(key, MemoryFlags.INPUT)
        # an array's bytes in C order as they are (tobytes would copy them once more)
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1) \
            if isinstance(data, np.ndarray) else bytes(data)
        if len(raw) != b.size:
            raise ValueError(f"input {b.name!r} needs {b.size} bytes, got {len(raw)}")
        self.backend.write_mem(b.address, raw)

    def bind_output(self, key: int | str, address: int | None = None) -> Binding:
        """Return the binding of output ``key``; outputs live in their allocated memory."""
        b = self._find(key, MemoryFlags.OUTPUT)
        if address is not None and address != b.address:
            raise ValueError(f"output {b.name!r} is fixed at {b.address:#x}; rebinding to "
                             f"{address:#x} is not supported")
        return b

    def read_output(self, key: int | str) -> np.ndarray:
        """Raw surface bytes of output ``key`` (uint8, tensor size)."""
        b = self._find(key, MemoryFlags.OUTPUT)
        return self.backend.read_mem(b.address, b.size)

    # ------------------------------------------------------------- submitting
    def task_addresses(self, task_id: int) -> list[int]:
        """Absolute DRAM address of each entry of task ``task_id``'s address list."""
        assert self.loadable is not None
        by_id = {a.id: a for a in self.loadable.address_list}
        task = {t.id: t for t in self.loadable.task_list}[task_id]
        out = []
        for aid in task.address_list:
            entry = by_id.get(aid)
            if entry is None:
                raise ValueError(f"task {task_id} references address id {aid}, not in the "
                                 f"address list")
            if entry.mem_id not in self.mem_address:
                raise ValueError(f"address {aid} references memory {entry.mem_id}, not "
                                 f"allocated")
            out.append(self.mem_address[entry.mem_id] + entry.offset)
        return out

    def submit(self) -> None:
        """Run the submit list in order; each entry's tasks one after another.  The
        backend's ``stats`` then hold the operations of this submit alone."""
        if self.loadable is None or self.firmware is None:
            raise RuntimeUsageError("no loadable loaded; call load() first")
        reset = getattr(self.backend, "reset_stats", None)
        if reset is not None:
            reset()
        tasks = {t.id: t for t in self.loadable.task_list}
        for entry in self.loadable.submit_list:
            for tid in entry.task_id:
                task = tasks.get(tid)
                if task is None:
                    raise ValueError(f"submit entry {entry.id} names task {tid}, not in the "
                                     f"task list ({', '.join(map(str, tasks))})")
                if task.interface != Interface.DLA1:
                    raise NotImplementedError(f"task {tid}: interface {task.interface} "
                                              f"(EMU1 CPU tasks) is not supported yet")
                self.firmware.run(self.task_addresses(tid))
