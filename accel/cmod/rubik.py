"""RUBIK: data reshaping without arithmetic - deconvolution contract, split, merge (nv_full).

Facts used (nvdla/doc ``hw/v1/ias/unit_description.rst`` "RUBIK", ``NVDLA_RBK.rdl``,
the cmod ``cmod/rubik/NV_NVDLA_rbk.cpp``, the RTL sequencer
``vmod/nvdla/rubik/NV_NVDLA_RUBIK_seq_gen.v`` and the firmware's
``kmd/firmware/rubik.c``):

* One operation per register group, started by ``D_OP_ENABLE``; completion
  raises the GLB ``RUBIK_DONE_STATUS<group>`` interrupt.
* All addresses and strides count 32-byte units (their fields start at bit 5).
  Sizes are value + 1.  The unit only moves bytes: ``IN_PRECISION`` INT8 (1
  byte, 32 elements per 32-byte atom), INT16 or FP16 (2 bytes, 16 per atom)
  only changes how many channels an atom holds and how wide a plane element is.
* Feature cubes use the layout of NVDLA_FACTS section 2 with 32-byte atoms:
  element ``(c, h, w)`` at ``(c // E) * surf + h * line + w * 32 + (c % E) * B``
  for ``E`` elements of ``B`` bytes per atom.  Whole atoms are read and written.
* **CONTRACT** (``RUBIK_MODE`` 0) undoes the channel extension of a strided
  deconvolution.  ``C' = DATAOUT_CHANNEL + 1`` output channels, ``S =
  ceil(C' / E)`` output surfaces, strides ``sx, sy = DECONV_X/Y_STRIDE + 1``.
  The input is ``sx * sy`` sub-cubes of ``W x H x C'`` (``DATAIN_SIZE_0``),
  sub-cube ``k = iy * sx + ix`` starting ``k * CONTRACT_STRIDE_0`` after the
  input base (the RTL's cube stride; the firmware programs ``S *
  DAIN_SURF_STRIDE``, which is what the cmod assumes).  Atom ``(s, h, w)`` of
  sub-cube ``(iy, ix)`` goes to output surface ``s``, row ``h * sy + iy``,
  column ``w * sx + ix``: address ``s * DAOUT_SURF_STRIDE + h *
  CONTRACT_STRIDE_1 + iy * DAOUT_LINE_STRIDE + (w * sx + ix) * 32`` (the
  firmware sets ``CONTRACT_STRIDE_1 = sy * DAOUT_LINE_STRIDE``).  The output
  is at most 8192 wide and high (documented limit).  ``DATAIN_CHANNEL`` is not
  used (as in the cmod).
* **SPLIT** (1): a ``W x H x C`` feature cube (``DATAIN_CHANNEL``, ``DAIN_*``
  strides) becomes ``DATAOUT_CHANNEL + 1`` pitch-linear planes: element ``(c,
  h, w)`` at ``c * DAOUT_PLANAR_STRIDE + h * DAOUT_LINE_STRIDE + w * B``.  Each
  plane line is written in whole 32-byte atoms, zero-filled after its ``W * B``
  data bytes.  The cmod reads ``ceil(C_in / E)`` surfaces and writes
  ``ceil(C_out / E)``; programming where these differ would desynchronise its
  read and write sequences, so the model rejects it.
* **MERGE** (2): ``DATAIN_CHANNEL + 1`` planes (``DAIN_PLANAR_STRIDE``,
  ``DAIN_LINE_STRIDE``; each plane line read in whole 32-byte atoms) become a
  feature cube at ``DAOUT_SURF/LINE_STRIDE``; the channel lanes past ``C`` in
  the last surface are written as zeros.
* ``*_RAM_TYPE`` 0 selects CV-SRAM, 1 DRAM; the model has one address space,
  and CV-SRAM on a configuration without a secondary memory interface is a
  :class:`ConfigError`.

Model choices: every operation reads all its input before writing (the
hardware streams, so an output overlapping its own input is unspecified), and
overlapping destination addresses keep the value written last in the order
surface -> line -> (row in stride group / plane) -> column.  The plane-stride
alignment to 64 bytes the documentation asks for is not enforced (the cmod
does not check it either).
"""

from __future__ import annotations

import numpy as np

from accel.cmod.csb import GroupView
from accel.cmod.dram import Dram
from accel.cmod.errors import ConfigError, UnsupportedError, check_elements
from accel.cmod.perf import rubik_cycles
from accel.cmod.records import OpRecord
from accel.config import HwConfig

UNIT = "RUBIK"
ATOM = 32  # bytes per atom of the Rubik datapath (RUBIK_ATOM_CUBE_SIZE)
MODES = ("CONTRACT", "SPLIT", "MERGE")
PRECISIONS = {0: ("INT8", 1), 1: ("INT16", 2), 2: ("FP16", 2)}
MAX_DIM = 8192  # "should not exceed 8192 in one contract layer"


def check_supported(g: GroupView, cfg: HwConfig) -> tuple[str, int]:
    """``(mode, bytes per element)`` of the programmed operation, or a clear error."""
    if not cfg.rubik:
        raise UnsupportedError(f"RUBIK is programmed but {cfg.name} has no Rubik")
    if cfg.atom_size != ATOM:
        raise UnsupportedError(f"RUBIK moves {ATOM}-byte atoms; {cfg.name} has "
                               f"{cfg.atom_size}-byte feature atoms")
    mode_v = g("D_MISC_CFG", "RUBIK_MODE")
    if mode_v >= len(MODES):
        raise ConfigError(UNIT, "D_MISC_CFG", g("D_MISC_CFG"),
                          f"RUBIK_MODE {mode_v} not in 0 (CONTRACT), 1 (SPLIT), 2 (MERGE)")
    mode = MODES[mode_v]
    flag = "rubik_contract" if mode == "CONTRACT" else "rubik_reshape"
    if not getattr(cfg, flag):
        raise UnsupportedError(f"RUBIK {mode} needs {flag}, which {cfg.name} does not have")
    prec = g("D_MISC_CFG", "IN_PRECISION")
    if prec not in PRECISIONS:
        raise ConfigError(UNIT, "D_MISC_CFG", g("D_MISC_CFG"),
                          f"IN_PRECISION {prec} not in 0 (INT8), 1 (INT16), 2 (FP16)")
    for reg, field in (("D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"),
                       ("D_DAOUT_RAM_TYPE", "DATAOUT_RAM_TYPE")):
        if not g(reg, field) and not cfg.secondary_memif:
            raise ConfigError(UNIT, reg, g(reg), f"{field} is CVSRAM but {cfg.name} has no "
                                                 "secondary memory interface")
    return mode, PRECISIONS[prec][1]


def run(g: GroupView, dram: Dram, cfg: HwConfig) -> OpRecord:
    """Execute the operation of register group ``g``; return its record."""
    mode, esize = check_supported(g, cfg)
    w = g("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    h = g("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
    src = g.addr("D_DAIN_ADDR_LOW", "D_DAIN_ADDR_HIGH")
    dst = g.addr("D_DAOUT_ADDR_LOW", "D_DAOUT_ADDR_HIGH")
    per_atom = ATOM // esize
    if mode == "CONTRACT":
        shape, moved = _contract(g, dram, src, dst, w, h, per_atom)
        read_bytes = write_bytes = moved
    elif mode == "SPLIT":
        shape, read_bytes, write_bytes = _split(g, dram, src, dst, w, h, per_atom, esize)
    else:
        shape, read_bytes, write_bytes = _merge(g, dram, src, dst, w, h, per_atom, esize)
    return OpRecord("RUBIK", rubik_cycles(cfg, read_bytes, write_bytes), shape,
                    {"mode": mode, "group": g.group, "precision": esize,
                     "bytes": {"read": read_bytes, "write": write_bytes}})


def _contract(g: GroupView, dram: Dram, src: int, dst: int, w: int, h: int,
              per_atom: int) -> tuple[dict, int]:
    c_out = g("D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
    sx = g("D_DECONV_STRIDE", "DECONV_X_STRIDE") + 1
    sy = g("D_DECONV_STRIDE", "DECONV_Y_STRIDE") + 1
    if w * sx > MAX_DIM or h * sy > MAX_DIM:
        raise ConfigError(UNIT, "D_DECONV_STRIDE", g("D_DECONV_STRIDE"),
                          f"contract output {w * sx}x{h * sy} (WxH) exceeds {MAX_DIM}")
    surfs = -(-c_out // per_atom)
    check_elements(UNIT, f"a contract of {sy * sx} sub-cubes of {surfs} surfaces of {h}x{w} atoms",
                   sy * sx * surfs * h * w * ATOM)
    # input axes (iy, ix, s, h, w, byte)
    iy, ix, s, hi, wi, b = _grid(sy, sx, surfs, h, w, ATOM)
    src_off = ((iy * sx + ix) * g("D_CONTRACT_STRIDE_0") + s * g("D_DAIN_SURF_STRIDE")
               + hi * g("D_DAIN_LINE_STRIDE") + wi * ATOM + b)
    data = dram.gather(src, src_off, UNIT)
    # output in write order (s, h, iy, w, ix, byte)
    data = data.transpose(2, 3, 0, 4, 1, 5)
    s, hi, iy, wi, ix, b = _grid(surfs, h, sy, w, sx, ATOM)
    dst_off = (s * g("D_DAOUT_SURF_STRIDE") + hi * g("D_CONTRACT_STRIDE_1")
               + iy * g("D_DAOUT_LINE_STRIDE") + (wi * sx + ix) * ATOM + b)
    dram.scatter(dst, dst_off, data, UNIT)
    shape = {"in": (sy * sx * c_out, h, w), "out": (c_out, h * sy, w * sx), "stride": (sx, sy)}
    return shape, int(data.size)


def _plane_line_bytes(w: int, esize: int) -> int:
    """Bytes of one plane line as the DMA moves it: whole 32-byte atoms."""
    return -(-w * esize // ATOM) * ATOM


def _split(g: GroupView, dram: Dram, src: int, dst: int, w: int, h: int, per_atom: int,
           esize: int) -> tuple[dict, int, int]:
    c_in = g("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    c_out = g("D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
    surfs = -(-c_in // per_atom)
    if -(-c_out // per_atom) != surfs:
        raise ConfigError(UNIT, "D_DATAOUT_SIZE_1", c_out - 1,
                          f"split of {c_in} channels ({surfs} surfaces) into {c_out} planes "
                          f"({-(-c_out // per_atom)} surfaces): the surface counts must agree")
    line_b = _plane_line_bytes(w, esize)
    check_elements(UNIT, f"a split of {surfs} surfaces of {h}x{w} atoms",
                   max(surfs * h * w * ATOM, c_out * h * line_b))
    s, hi, wi, b = _grid(surfs, h, w, ATOM)
    atoms = dram.gather(src, s * g("D_DAIN_SURF_STRIDE") + hi * g("D_DAIN_LINE_STRIDE")
                        + wi * ATOM + b, UNIT)
    # (s, h, w, lane, byte) -> (s, lane, h, w, byte) -> planes (c, h, w * esize)
    planes = atoms.reshape(surfs, h, w, per_atom, esize).transpose(0, 3, 1, 2, 4)
    planes = planes.reshape(surfs * per_atom, h, w * esize)[:c_out]
    out = np.zeros((c_out, h, line_b), dtype=np.uint8)
    out[:, :, :w * esize] = planes
    c, hi, j = _grid(c_out, h, line_b)
    dram.scatter(dst, c * g("D_DAOUT_PLANAR_STRIDE") + hi * g("D_DAOUT_LINE_STRIDE") + j,
                 out, UNIT)
    return {"in": (c_in, h, w), "out": (c_out, h, w)}, int(atoms.size), int(out.size)


def _merge(g: GroupView, dram: Dram, src: int, dst: int, w: int, h: int, per_atom: int,
           esize: int) -> tuple[dict, int, int]:
    c = g("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
    surfs = -(-c // per_atom)
    line_b = _plane_line_bytes(w, esize)
    check_elements(UNIT, f"a merge of {c} planes of {h}x{w}",
                   max(c * h * line_b, surfs * h * w * ATOM))
    ci, hi, j = _grid(c, h, line_b)
    raw = dram.gather(src, ci * g("D_DAIN_PLANAR_STRIDE") + hi * g("D_DAIN_LINE_STRIDE") + j,
                      UNIT)
    cube = np.zeros((surfs * per_atom, h, w, esize), dtype=np.uint8)  # padded lanes stay 0
    cube[:c] = raw[:, :, :w * esize].reshape(c, h, w, esize)
    # (s, lane, h, w, byte) -> atoms (s, h, w, lane * byte)
    atoms = cube.reshape(surfs, per_atom, h, w, esize).transpose(0, 2, 3, 1, 4)
    s, hi, wi, b = _grid(surfs, h, w, ATOM)
    dram.scatter(dst, s * g("D_DAOUT_SURF_STRIDE") + hi * g("D_DAOUT_LINE_STRIDE")
                 + wi * ATOM + b, atoms.reshape(surfs, h, w, ATOM), UNIT)
    return {"in": (c, h, w), "out": (c, h, w)}, int(raw.size), int(atoms.size)


def _grid(*sizes: int) -> list[np.ndarray]:
    """Broadcastable int64 index arrays, one axis per size."""
    n = len(sizes)
    return [np.arange(k, dtype=np.int64).reshape([-1 if i == j else 1 for j in range(n)])
            for i, k in enumerate(sizes)]
