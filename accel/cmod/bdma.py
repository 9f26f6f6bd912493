"""BDMA: the bridge DMA - memory-to-memory copies of lines and surfaces (nv_full).

Semantics of the NVDLA cmod (``cmod/bdma``, register model and ``BdmaCore``):

* The ``CFG_*`` registers are single (no ping-pong groups).  Writing
  ``CFG_OP.EN = 1`` snapshots them as one transfer into a command FIFO of
  :data:`FIFO_DEPTH` entries and clears ``EN``; ``STATUS.FREE_SLOT`` counts
  the free entries.
* Writing ``CFG_LAUNCH0.GRP0_LAUNCH = 1`` (or ``LAUNCH1``) runs every transfer
  queued since the previous launch, in order, and raises the GLB interrupt
  ``BDMA_DONE_STATUS0`` (1) when the last one has been written.
* One transfer copies ``CFG_SURF_REPEAT + 1`` surfaces of ``CFG_LINE_REPEAT +
  1`` lines of ``(CFG_LINE.SIZE + 1) * 32`` bytes; line and surface strides
  and both addresses are in 32-byte units (their fields start at bit 5).
  Each transfer reads all its source bytes before writing (the model's choice
  for overlapping regions, which the cmod's pipelined reader/writer leaves
  unspecified).
* ``CFG_CMD.*_RAM_TYPE`` selects CV-SRAM (0) or DRAM (1).  The model has one
  address space, so both reach :class:`~accel.cmod.dram.Dram`; CV-SRAM on a
  configuration without a secondary memory interface is a :class:`ConfigError`.
"""

from __future__ import annotations

import numpy as np

from accel.cmod.csb import UnitRegs
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError, check_elements
from accel.cmod.glb import Glb
from accel.cmod.perf import dma_cycles
from accel.cmod.records import OpRecord
from accel.config import HwConfig

UNIT = "BDMA"
FIFO_DEPTH = 20  # STATUS.FREE_SLOT reset value; the firmware's 20-transfer limit
_TRANSFER_REGS = ("CFG_SRC_ADDR_LOW", "CFG_SRC_ADDR_HIGH", "CFG_DST_ADDR_LOW", "CFG_DST_ADDR_HIGH",
                  "CFG_LINE", "CFG_CMD", "CFG_LINE_REPEAT", "CFG_SRC_LINE", "CFG_DST_LINE",
                  "CFG_SURF_REPEAT", "CFG_SRC_SURF", "CFG_DST_SURF")


class Bdma:
    """The BDMA of one core: its command FIFO and the copies it performs."""

    def __init__(self, regs: UnitRegs, dram: Dram, cfg: HwConfig, glb: Glb) -> None:
        self.regs, self.dram, self.cfg, self.glb = regs, dram, cfg, glb
        self.queue: list[dict[str, int]] = []

    def csb_write(self, name: str, value: int) -> OpRecord | None:
        """Act on a write already stored in the register file; a launch returns its record."""
        rec = None
        if not self.cfg.bdma:
            if name in ("CFG_OP", "CFG_LAUNCH0", "CFG_LAUNCH1") and value & 1:
                raise UnsupportedError(f"BDMA is programmed but {self.cfg.name} has no BDMA")
            return rec
        if name == "CFG_OP" and value & 1:
            if len(self.queue) >= FIFO_DEPTH:
                raise ConfigError(UNIT, "CFG_OP", value,
                                  f"the command FIFO already holds {FIFO_DEPTH} transfers; "
                                  "launch a group first")
            self.queue.append({r: self.regs.read(self.regs.unit.registers[r])
                               for r in _TRANSFER_REGS})
            self.regs.set_hw("CFG_OP", 0)
        elif name in ("CFG_LAUNCH0", "CFG_LAUNCH1") and value & 1:
            group = int(name[-1])
            ops, self.queue = self.queue, []  # a failing launch still consumes its group
            self.regs.set_hw(name, 0)
            try:
                rec = self._launch(ops, group)
            finally:
                self._update_status()
            self.glb.raise_done("BDMA", group)
        self._update_status()
        return rec

    def _update_status(self) -> None:
        reg = self.regs.unit.registers["STATUS"]
        slot = reg.field("FREE_SLOT")
        idle = reg.field("IDLE")
        value = ((FIFO_DEPTH - len(self.queue)) << slot.lsb) | ((not self.queue) << idle.lsb)
        self.regs.set_hw("STATUS", value)

    def _launch(self, ops: list[dict[str, int]], group: int) -> OpRecord:
        moved = 0
        for i, op in enumerate(ops):
            moved += self._transfer(op, i)
        return OpRecord("BDMA", dma_cycles(self.cfg, 2 * moved), (len(ops), moved),
                        {"group": group, "transfers": len(ops), "bytes": moved})

    def _transfer(self, op: dict[str, int], index: int) -> int:
        for side in ("SRC", "DST"):
            if not (op["CFG_CMD"] >> (0 if side == "SRC" else 1)) & 1 \
                    and not self.cfg.secondary_memif:
                raise ConfigError(UNIT, "CFG_CMD", op["CFG_CMD"],
                                  f"transfer {index}: {side}_RAM_TYPE is CVSRAM but "
                                  f"{self.cfg.name} has no secondary memory interface")
        src = (op["CFG_SRC_ADDR_HIGH"] << 32) | (op["CFG_SRC_ADDR_LOW"] & ~0x1F)
        dst = (op["CFG_DST_ADDR_HIGH"] << 32) | (op["CFG_DST_ADDR_LOW"] & ~0x1F)
        size = ((op["CFG_LINE"] & 0x1FFF) + 1) * 32
        lines = (op["CFG_LINE_REPEAT"] & 0xFFFFFF) + 1
        surfs = (op["CFG_SURF_REPEAT"] & 0xFFFFFF) + 1
        check_elements(UNIT, f"transfer {index} of {surfs}x{lines} lines of {size} B",
                       surfs * lines * size)
        for base, ls, ss, what in ((src, "CFG_SRC_LINE", "CFG_SRC_SURF", "read"),
                                   (dst, "CFG_DST_LINE", "CFG_DST_SURF", "write")):
            # the extreme bytes bound the whole transfer: check before building offsets
            span = (surfs - 1) * (op[ss] & ~0x1F) + (lines - 1) * (op[ls] & ~0x1F) + size
            self.dram._region(base, span, UNIT, f"transfer {index} {what}")
        byte = np.arange(size, dtype=np.int64)[None, None, :]
        li = np.arange(lines, dtype=np.int64)[None, :, None]
        si = np.arange(surfs, dtype=np.int64)[:, None, None]

        def offsets(line_reg: str, surf_reg: str) -> np.ndarray:
            return (si * (op[surf_reg] & ~0x1F) + li * (op[line_reg] & ~0x1F) + byte)

        data = self.dram.gather(src, offsets("CFG_SRC_LINE", "CFG_SRC_SURF"), UNIT)
        self.dram.scatter(dst, offsets("CFG_DST_LINE", "CFG_DST_SURF"), data, UNIT)
        return int(data.size)
