"""A test double of the Backend protocol: flat DRAM regions, a register file,
and completion interrupts raised when an engine's D_OP_ENABLE is written."""

from __future__ import annotations

import numpy as np

from accel.regs import by_address, lookup

STATUS = lookup("NVDLA_GLB.S_INTR_STATUS")
DONE = {"NVDLA_CACC": "CACC_DONE_STATUS", "NVDLA_SDP": "SDP_DONE_STATUS",
        "NVDLA_PDP": "PDP_DONE_STATUS", "NVDLA_CDP": "CDP_DONE_STATUS"}


class FakeBackend:
    name = "fake"

    def __init__(self) -> None:
        self.mem: dict[int, np.ndarray] = {}
        self.regs: dict[int, int] = {}
        self.pointer: dict[str, int] = {}
        self.intr = 0
        self.enables: list[str] = []

    def map_memory(self, base, size, name):
        self.mem[base] = np.zeros(size, np.uint8)

    def _at(self, addr, size):
        for base, arr in self.mem.items():
            if base <= addr and addr + size <= base + arr.size:
                return arr, addr - base
        raise IndexError(f"unmapped {addr:#x}+{size}")

    def write_mem(self, addr, data):
        arr, off = self._at(addr, len(data))
        arr[off:off + len(data)] = np.frombuffer(bytes(data), np.uint8)

    def read_mem(self, addr, size):
        arr, off = self._at(addr, size)
        return arr[off:off + size].copy()

    def write_reg(self, addr, value):
        reg = by_address(addr)
        if reg.name == "S_POINTER":
            self.pointer[reg.unit] = value & 1
        elif reg.name == "D_OP_ENABLE":
            self.enables.append(reg.unit)
            if reg.unit in DONE:
                group = self.pointer.get(reg.unit, 0)
                self.intr |= STATUS.field(f"{DONE[reg.unit]}{group}").mask
        elif addr == STATUS.address:
            self.intr &= ~value
        self.regs[addr] = value

    def read_reg(self, addr):
        return self.intr if addr == STATUS.address else self.regs.get(addr, 0)

    def wait_interrupt(self, mask):
        assert self.intr & mask, f"no interrupt pending in {mask:#x}"
        return self.intr & mask

    stats: list = []

    def reset_stats(self) -> None:
        pass                # records nothing
