"""SDP_RDMA: the SDP read DMAs - input cube (MRDMA) and X1/X2/Y operands (BRDMA/NRDMA/ERDMA).

Operand data (NVDLA_FACTS section 2): per-kernel operands are a packed 1x1xC
cube, per-element operands a WxHxC cube with the line/surface strides of their
RDMA.  Each element holds one or two components (``DATA_USE`` ALU, MUL or
BOTH; with BOTH the ALU value comes first) of one or two bytes; one-byte
operands are sign-extended.  Reads cover whole atoms, so the padded lanes of
the last channel group carry whatever memory holds there.
"""

from __future__ import annotations

import numpy as np

from accel.cmod.csb import GroupView
from accel.cmod.cube import cube_offsets, read_int8_cube
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError
from accel.config import HwConfig

UNIT = "SDP_RDMA"
USE_MUL, USE_ALU, USE_BOTH = 0, 1, 2
# stage prefix in SDP registers -> prefix of its read DMA in SDP_RDMA registers
DMA_OF_STAGE = {"BS": ("BRDMA", "BS"), "BN": ("NRDMA", "BN"), "EW": ("ERDMA", "EW")}


def read_input(g: GroupView, dram: Dram, cfg: HwConfig, c_pad: int, h: int, w: int) -> np.ndarray:
    """The int8 input cube ``[c_pad, h, w]`` (int64) of an SDP reading from memory."""
    if g("D_FEATURE_MODE_CFG", "IN_PRECISION") != 0:
        raise UnsupportedError("SDP_RDMA input precision other than int8 is not modelled")
    base = g.addr("D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH")
    return read_int8_cube(dram, base, c_pad, h, w, cfg.atom_size,
                          g("D_SRC_LINE_STRIDE"), g("D_SRC_SURFACE_STRIDE"), "SDP_RDMA")


def read_operands(g: GroupView, dram: Dram, cfg: HwConfig, stage: str,
                  c_pad: int, h: int, w: int) -> dict[int, np.ndarray]:
    """Operands fetched for ``stage`` ("BS", "BN", "EW"): ``{data_use_component: array}``.

    Arrays broadcast against the ``[c_pad, h, w]`` data cube (``[c_pad, 1, 1]``
    per kernel).  Keys are ``USE_ALU`` and/or ``USE_MUL``.
    """
    dma, pre = DMA_OF_STAGE[stage]
    cfg_reg = f"D_{dma}_CFG"
    if g(cfg_reg, f"{dma}_DISABLE"):
        return {}
    use = g(cfg_reg, f"{dma}_DATA_USE")
    if use not in (USE_MUL, USE_ALU, USE_BOTH):
        raise ConfigError(UNIT, cfg_reg, g(cfg_reg), f"{dma}_DATA_USE={use} is not MUL/ALU/BOTH")
    nbytes = 2 if g(cfg_reg, f"{dma}_DATA_SIZE") else 1
    comps = [USE_ALU, USE_MUL] if use == USE_BOTH else [use]
    esize = nbytes * len(comps)
    base = g.addr(f"D_{pre}_BASE_ADDR_LOW", f"D_{pre}_BASE_ADDR_HIGH")
    a = cfg.atom_size
    if g(cfg_reg, f"{dma}_DATA_MODE"):  # per element
        offs = cube_offsets(c_pad, h, w, a, g(f"D_{pre}_LINE_STRIDE"),
                            g(f"D_{pre}_SURFACE_STRIDE"), esize)
    else:  # per kernel: a packed 1x1xC cube
        offs = np.arange(c_pad, dtype=np.int64)[:, None, None] * esize
    out = {}
    for i, comp in enumerate(comps):
        lo = dram.gather(base, offs + i * nbytes, UNIT).astype(np.int64)
        if nbytes == 1:
            val = lo.astype(np.uint8).view(np.int8).astype(np.int64)
        else:
            hi = dram.gather(base, offs + i * nbytes + 1, UNIT).astype(np.int64)
            val = ((hi << 8) | lo).astype(np.uint16).view(np.int16).astype(np.int64)
        out[comp] = val
    return out
