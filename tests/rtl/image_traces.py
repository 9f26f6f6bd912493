"""Image-input convolutions as register traces: NVIDIA's ``img_*`` programming on random
images, with a geometry of our choosing, and the cmodel's output as the golden.

NVIDIA published the register programming of nv_small's ten ``img_*`` traces (one per
pixel format) but not their input images (``<name>_dt.dat``), so their golden CRCs
cannot be checked.  :func:`image_trace` keeps a trace's register writes - its pixel
format, SDP, CACC and everything else as NVIDIA wrote them - and rewrites the ones that
give the image's and the convolution's geometry (:class:`Geometry`: size, padding, x
offset, window, strides, kernels) and the input converter (means, offset, scale,
truncation, sign), loads a random image and random weights, plays it on the cmodel and
writes the CRC of the cmodel's output as the trace's ``check_crc``.  The RTL engine
must then pass the trace: its output equal to the cmodel's byte for byte.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accel import cbuf
from accel.cmod.dla import Dla
from accel.cmod.dram import Dram
from accel.config import HwConfig
from accel.regs import field_set, lookup
from accel.trace.cmod_player import CmodPlayer
from accel.trace.script import find_cfg, parse_cfg, parse_int
from accel.trace.writer import TraceBuilder

#: nv_small's image traces: one per pixel format
IMAGE_TRACES = ("A8B8G8R8", "A8R8G8B8", "A8Y8U8V8", "B8G8R8A8", "B8G8R8X8", "R8G8B8A8",
                "R8G8B8X8", "V8U8Y8A8", "X8B8G8R8", "X8R8G8B8")


def trace_name(fmt: str) -> str:
    return f"img_51x96x4_1x10x4x32_{fmt}_int8_0"


@dataclass(frozen=True)
class Geometry:
    """An image convolution: a ``width x height`` image of 4-byte pixels read from pixel
    ``x_offset`` of its lines, padded, and ``kernels`` kernels of ``window`` pixels by
    ``rows`` rows at strides ``stride_x``, ``stride_y``; the input converter's settings
    (``cvt``: enable, offset, scale, truncate; ``means``: per channel, or None for the
    offset), ``signed`` pixels (``PIXEL_SIGN_OVERRIDE``) and the padding value."""

    width: int
    height: int
    window: int
    rows: int
    kernels: int
    stride_x: int = 1
    stride_y: int = 1
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)      # left, right, top, bottom
    x_offset: int = 0
    cvt: tuple[int, int, int, int] = (1, 0, 1, 0)
    means: tuple[int, int, int, int] | None = None
    signed: bool = False
    pad_value: int = 0

    @property
    def channels(self) -> int:
        """The pre-extended window's channels: ``window`` pixels of 4."""
        return 4 * self.window

    @property
    def out_w(self) -> int:
        left, right = self.pad[:2]
        return (left + self.width + right - self.window) // self.stride_x + 1

    @property
    def out_h(self) -> int:
        top, bottom = self.pad[2:]
        return (top + self.height + bottom - self.rows) // self.stride_y + 1


def random_geometry(rng: np.random.Generator) -> Geometry:
    """A geometry small enough for a quick run, with every option drawn: odd and even
    windows, strides, padding, x offsets, converters and sign."""
    window = int(rng.integers(1, 9))
    width = int(rng.integers(window, 40))
    pad = tuple(int(v) for v in rng.integers(0, 4, 4))
    rows = int(rng.integers(1, 5))
    height = int(rng.integers(max(1, rows - pad[2] - pad[3]), 14))
    cvt_on = int(rng.random() < 0.8)
    signed = bool(rng.random() < 0.3)
    # a converter that keeps most values inside int8: offsets and means near the pixels'
    # middle, scales about 2**t (one setting in eight drawn from the whole field)
    centre = 0 if signed else 128
    t = int(rng.integers(0, 8))
    scale = int(rng.choice([-1, 1])) * max(1, round((1 << t) * rng.uniform(0.3, 1.2)))
    offset = centre + int(rng.integers(-60, 60))
    if rng.random() < 0.125:
        scale, offset = int(rng.integers(-32768, 32768)), int(rng.integers(-32768, 32768))
    means = tuple(centre + int(v) for v in rng.integers(-60, 60, 4)) \
        if rng.random() < 0.6 else None
    return Geometry(width, height, window, rows, kernels=int(rng.integers(1, 20)),
                    stride_x=int(rng.integers(1, 4)), stride_y=int(rng.integers(1, 3)),
                    pad=pad, x_offset=int(rng.integers(0, 8)),
                    cvt=(cvt_on, offset, scale, t), means=means, signed=signed,
                    pad_value=int(rng.integers(-128, 128)))


def _fields(values: dict[str, int], symbol: str, **fields: int) -> None:
    """Set ``fields`` of ``symbol`` in ``values`` (the register's last value, or 0)."""
    reg = lookup(symbol)
    value = values.get(reg.symbol, 0)
    for name, v in fields.items():
        value = field_set(value, reg, name, v & ((1 << reg.field(name).width) - 1))
    values[reg.symbol] = value


def _registers(values: dict[str, int], hw: HwConfig, geo: Geometry, image: int,
               weights: int, dst: int, line: int) -> None:
    """Set in ``values`` (NVIDIA's register values, symbol -> value) the fields a geometry
    gives, with the image, weights and output at ``image``, ``weights`` and ``dst``."""
    c, k, r = geo.channels, geo.kernels, geo.rows
    left, right, top, bottom = geo.pad
    bpk = r * c
    w_ext = left + geo.width + right
    eps = cbuf.image_entries_per_slice(hw, 4, w_ext, 1)
    data_banks = -(-eps * geo.height // hw.cbuf_bank_depth)
    weight_banks = cbuf.weight_banks_total(hw, k, bpk)
    out_line = geo.out_w * hw.atom_size
    out_surface = out_line * geo.out_h
    for unit in ("CDMA", "CSC"):
        u = f"NVDLA_{unit}"
        _fields(values, f"{u}.D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=geo.width - 1,
                DATAIN_HEIGHT_EXT=geo.height - 1)
        _fields(values, f"{u}.D_ENTRY_PER_SLICE", ENTRIES=eps - 1)
        _fields(values, f"{u}.D_BANK", DATA_BANK=data_banks - 1, WEIGHT_BANK=weight_banks - 1)
        _fields(values, f"{u}.D_WEIGHT_BYTES", WEIGHT_BYTES=cbuf.weight_bytes(k, bpk))
        _fields(values, f"{u}.D_ZERO_PADDING_VALUE", PAD_VALUE=geo.pad_value)
    _fields(values, "NVDLA_CDMA.D_DATAIN_SIZE_0", DATAIN_WIDTH=geo.width - 1,
            DATAIN_HEIGHT=geo.height - 1)
    _fields(values, "NVDLA_CDMA.D_ZERO_PADDING", PAD_LEFT=left, PAD_RIGHT=right, PAD_TOP=top,
            PAD_BOTTOM=bottom)
    _fields(values, "NVDLA_CDMA.D_CONV_STRIDE", CONV_X_STRIDE=geo.stride_x - 1,
            CONV_Y_STRIDE=geo.stride_y - 1)
    _fields(values, "NVDLA_CDMA.D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=bpk - 1)
    _fields(values, "NVDLA_CDMA.D_WEIGHT_SIZE_1", WEIGHT_KERNEL=k - 1)
    _fields(values, "NVDLA_CDMA.D_PIXEL_OFFSET", PIXEL_X_OFFSET=geo.x_offset)
    _fields(values, "NVDLA_CDMA.D_LINE_STRIDE", LINE_STRIDE=line)
    _fields(values, "NVDLA_CDMA.D_DAIN_ADDR_LOW_0", DATAIN_ADDR_LOW_0=image)
    _fields(values, "NVDLA_CDMA.D_WEIGHT_ADDR_LOW", WEIGHT_ADDR_LOW=weights)
    enable, offset, scale, truncate = geo.cvt
    _fields(values, "NVDLA_CDMA.D_CVT_CFG", CVT_EN=enable, CVT_TRUNCATE=truncate)
    _fields(values, "NVDLA_CDMA.D_CVT_OFFSET", CVT_OFFSET=offset)
    _fields(values, "NVDLA_CDMA.D_CVT_SCALE", CVT_SCALE=scale)
    means = geo.means or (0, 0, 0, 0)
    _fields(values, "NVDLA_CDMA.D_MEAN_FORMAT", MEAN_FORMAT=int(geo.means is not None))
    _fields(values, "NVDLA_CDMA.D_MEAN_GLOBAL_0", MEAN_RY=means[0], MEAN_GU=means[1])
    _fields(values, "NVDLA_CDMA.D_MEAN_GLOBAL_1", MEAN_BV=means[2], MEAN_AX=means[3])
    _fields(values, "NVDLA_CSC.D_ZERO_PADDING", PAD_LEFT=left, PAD_TOP=top)
    _fields(values, "NVDLA_CSC.D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=geo.stride_x - 1,
            CONV_Y_STRIDE_EXT=geo.stride_y - 1)
    _fields(values, "NVDLA_CSC.D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=0,
            WEIGHT_HEIGHT_EXT=r - 1)
    _fields(values, "NVDLA_CSC.D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=c - 1,
            WEIGHT_KERNEL=k - 1)
    _fields(values, "NVDLA_CSC.D_ATOMICS", ATOMICS=geo.out_w * geo.out_h - 1)
    for unit in ("CSC", "CACC"):
        _fields(values, f"NVDLA_{unit}.D_DATAOUT_SIZE_0", DATAOUT_WIDTH=geo.out_w - 1,
                DATAOUT_HEIGHT=geo.out_h - 1)
        _fields(values, f"NVDLA_{unit}.D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=k - 1)
    # the sums of bpk random products, about sqrt(bpk) * 74 * 74 apart, truncated to
    # a spread of about 50 (NVIDIA's truncation of 3 saturates most of them)
    spread = max(1.0, bpk ** 0.5 * 74 * 74 / 50)
    _fields(values, "NVDLA_CACC.D_CLIP_CFG", CLIP_TRUNCATE=min(31, int(np.log2(spread))))
    _fields(values, "NVDLA_CACC.D_LINE_STRIDE", LINE_STRIDE=out_line)
    _fields(values, "NVDLA_CACC.D_SURF_STRIDE", SURF_STRIDE=out_surface)
    _fields(values, "NVDLA_CACC.D_DATAOUT_ADDR", DATAOUT_ADDR=dst)
    _fields(values, "NVDLA_SDP.D_DATA_CUBE_WIDTH", WIDTH=geo.out_w - 1)
    _fields(values, "NVDLA_SDP.D_DATA_CUBE_HEIGHT", HEIGHT=geo.out_h - 1)
    _fields(values, "NVDLA_SDP.D_DATA_CUBE_CHANNEL", CHANNEL=k - 1)
    _fields(values, "NVDLA_SDP.D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst)
    _fields(values, "NVDLA_SDP.D_DST_LINE_STRIDE", DST_LINE_STRIDE=out_line)
    _fields(values, "NVDLA_SDP.D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=out_surface)
    _fields(values, "NVDLA_CDMA.D_DATAIN_FORMAT", PIXEL_SIGN_OVERRIDE=int(geo.signed))


def image_trace(nvidia: Path, out_dir: Path, hw: HwConfig, geo: Geometry,
                rng: np.random.Generator, name: str) -> Path:
    """Write trace ``out_dir/name/``: NVIDIA's trace ``nvidia`` (its directory) with
    ``geo``'s registers, a random image and random weights, and the cmodel's output CRC
    as its golden.  Returns the trace directory."""
    image, weights, dst = 0x80000000, 0x90000000, 0xA0000000
    line = -(-(geo.x_offset + geo.width) * 4 // 32) * 32 + 32 * int(rng.integers(0, 2))
    writes = [cmd for cmd in parse_cfg(find_cfg(nvidia)) if cmd.name == "reg_write"]
    nvidia_values = {lookup(cmd.args[0]).symbol: parse_int(cmd.args[1]) for cmd in writes}
    new = dict(nvidia_values)
    _registers(new, hw, geo, image, weights, dst, line)
    if set(new) - set(nvidia_values):            # a register NVIDIA's trace does not write
        raise ValueError(f"not written by {nvidia.name}: {sorted(set(new) - set(nvidia_values))}")
    bpk = geo.rows * geo.channels
    wbytes = cbuf.weight_bytes(geo.kernels, bpk)
    wt = np.zeros(wbytes, np.uint8)
    wt[:geo.kernels * bpk] = rng.integers(0, 256, geo.kernels * bpk)
    out_size = -(-geo.kernels // hw.atomic_k) * geo.out_w * hw.atom_size * geo.out_h

    def build(crc: int | None) -> TraceBuilder:
        t = TraceBuilder(name)
        t.load(image, pixels, "image")
        t.load(weights, wt, "weights")
        t.lines.append(f"mem_init(pri_mem, {dst:#x}, {out_size:#x}, ALL_ZERO);")
        sync = None
        for cmd in parse_cfg(find_cfg(nvidia)):
            if cmd.name == "reg_write":
                symbol = lookup(cmd.args[0]).symbol
                t.write(cmd.args[0], new[symbol])
            elif cmd.name == "poll_reg_equal":
                t.lines.append(f"poll_reg_equal({', '.join(cmd.args)});")
            elif cmd.name == "intr_notify":
                t.notify(*cmd.args)
                sync = cmd.args[1]
        if crc is not None:
            t.check_crc(sync, dst, out_size, crc)
        return t

    pixels = rng.integers(0, 256, geo.height * line, dtype=np.uint8)
    path = build(None).save(out_dir)
    dla = Dla(hw, Dram())
    CmodPlayer(find_cfg(path), dla).run(parse_cfg(find_cfg(path)))
    crc = zlib.crc32(dla.dram.read(dst, out_size).tobytes()) & 0xFFFFFFFF
    return build(crc).save(out_dir)
