"""NVDLA memory layouts as pure pack/unpack pairs.

Feature cube (NVDLA hw doc ``format.rst``)
------------------------------------------
A C x H x W cube is cut into 1 x 1 x A atoms, A = ``cfg.atom_size`` bytes
(8 int8 channels on nv_small, 32 on nv_large).  Memory order is C' -> W -> H
-> C: the A channels of one atom are contiguous, atoms of a line follow each
other, lines are ``line_stride`` apart and surfaces (groups of A channels)
``surf_stride`` apart.  The byte offset of int8 element (c, h, w) is::

    (c // A) * surf_stride + h * line_stride + w * A + (c % A)

The last surface is padded up to whole atoms; :func:`pack_feature` fills the
padded lanes with ``pad_value`` (0 by default: NVDLA's SDP writes them too, and
the convolution ignores lanes beyond the channel count).

Worked example, nv_small (A = 8), a 10 x 1 x 2 cube (C=10, H=1, W=2), packed:
line stride 16, surface stride 16, two surfaces; channel 9 of pixel w=1 sits at
``1*16 + 0*16 + 1*8 + 1 = 25``.

Elements wider than a byte (``elem_bytes=2``: int16 SDP operands, or two
components per element) keep A elements per atom, which then spans
``A * elem_bytes`` bytes; :func:`cube_offsets` is the one formula, and the
cmodel's DMAs use it too (checked by NVDLA's ``sdp_*_mem`` traces).

Direct-convolution weights (``format.rst``; sw ``WeightTranslationUnit.h``)
-------------------------------------------------------------------------
Kernels are grouped by ATOMIC_K (last group may be partial); each kernel is
cut into blocks of ATOMIC_C channels (the last one partial, *not* padded).
Loop nest, outermost first: kernel group -> channel block -> r -> s ->
kernel in group -> channel in block.  The total is zero-padded to
``pad_to`` bytes (a CBUF entry by default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.config import HwConfig


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def align_up(value: int, alignment: int) -> int:
    return ceil_div(value, alignment) * alignment


def cube_offsets(c: int, h: int, w: int, atom: int, line_stride: int, surf_stride: int,
                 esize: int = 1) -> np.ndarray:
    """int64 ``[c, h, w]`` byte offsets of the first byte of every element.

    ``atom`` elements of ``esize`` bytes form an atom::

        (c // atom) * surf_stride + h * line_stride + w * atom * esize + (c % atom) * esize

    >>> cube_offsets(3, 1, 2, atom=2, line_stride=8, surf_stride=16)[:, 0, :].tolist()
    [[0, 2], [1, 3], [16, 18]]
    """
    ci = np.arange(c, dtype=np.int64)[:, None, None]
    hi = np.arange(h, dtype=np.int64)[None, :, None]
    wi = np.arange(w, dtype=np.int64)[None, None, :]
    return (ci // atom) * surf_stride + hi * line_stride + wi * (atom * esize) + (ci % atom) * esize


@dataclass(frozen=True)
class CubeLayout:
    """Geometry of one feature cube in memory.

    ``atom`` is the channels (elements) per atom, ``cfg.atom_size``; strides
    and sizes are in bytes.
    """

    channels: int
    height: int
    width: int
    atom: int
    line_stride: int
    surf_stride: int
    elem_bytes: int = 1

    @property
    def channels_per_atom(self) -> int:
        return self.atom

    @property
    def atom_bytes(self) -> int:
        return self.atom * self.elem_bytes

    @property
    def surfaces(self) -> int:
        return ceil_div(self.channels, self.channels_per_atom)

    @property
    def size(self) -> int:
        """Bytes from the cube's start to the end of its last atom."""
        last_line_end = (self.height - 1) * self.line_stride + self.width * self.atom_bytes
        return (self.surfaces - 1) * self.surf_stride + last_line_end

    def validate(self) -> None:
        if min(self.channels, self.height, self.width) <= 0:
            raise ValueError(f"cube {self.channels}x{self.height}x{self.width} must be non-empty")
        for label, stride in (("line_stride", self.line_stride),
                              ("surf_stride", self.surf_stride)):
            if stride % self.atom:
                raise ValueError(f"{label}={stride} is not a multiple of the atom size {self.atom}")
        if self.line_stride < self.width * self.atom_bytes:
            raise ValueError(
                f"line_stride={self.line_stride} < width*atom={self.width * self.atom_bytes}")
        if self.surf_stride < (self.height - 1) * self.line_stride + self.width * self.atom_bytes:
            raise ValueError(f"surf_stride={self.surf_stride} overlaps lines of height "
                             f"{self.height} with line_stride {self.line_stride}")


def cube_layout(cfg: HwConfig, channels: int, height: int, width: int, *,
                line_stride: int | None = None, surf_stride: int | None = None,
                elem_bytes: int = 1) -> CubeLayout:
    """Layout of a cube, packed (no gaps) unless strides are given."""
    atom = cfg.atom_size
    ls = width * atom * elem_bytes if line_stride is None else line_stride
    ss = height * ls if surf_stride is None else surf_stride
    layout = CubeLayout(channels, height, width, atom, ls, ss, elem_bytes)
    layout.validate()
    return layout


def _byte_index(layout: CubeLayout) -> np.ndarray:
    """Byte offset of the first byte of every element, shape [C, H, W]."""
    return cube_offsets(layout.channels, layout.height, layout.width, layout.atom,
                        layout.line_stride, layout.surf_stride, layout.elem_bytes)


def _element_dtype(elem_bytes: int) -> np.dtype:
    if elem_bytes not in (1, 2):
        raise ValueError(f"elem_bytes={elem_bytes} not in 1, 2")
    return np.dtype("<i2") if elem_bytes == 2 else np.dtype(np.int8)


def _atom_view(buf: np.ndarray, layout: CubeLayout) -> np.ndarray:
    """``buf`` seen as the elements ``[surface, lane, row, column]`` of ``layout`` (a view:
    lanes of an atom are adjacent, atoms of a line ``atom_bytes`` apart, lines
    ``line_stride``, surfaces ``surf_stride``; :meth:`CubeLayout.validate` keeps them apart)."""
    eb = layout.elem_bytes
    return np.ndarray((layout.surfaces, layout.atom, layout.height, layout.width),
                      _element_dtype(eb), buffer=buf,
                      strides=(layout.surf_stride, eb, layout.line_stride, layout.atom * eb))


def pack_feature(x: np.ndarray, layout: CubeLayout, pad_value: int = 0) -> np.ndarray:
    """Pack a [C, H, W] integer cube into a uint8 buffer of ``layout.size`` bytes.

    Padded lanes of the last surface hold ``pad_value``; bytes in stride gaps
    are 0.  Values are stored modulo 2**(8 * elem_bytes), as ``astype`` does.
    """
    x = np.asarray(x)
    shape = (layout.channels, layout.height, layout.width)
    if x.shape != shape:
        raise ValueError(f"cube shape {x.shape} does not match layout {shape}")
    dtype = _element_dtype(layout.elem_bytes)
    buf = np.zeros(layout.size, dtype=np.uint8)
    view = _atom_view(buf, layout)
    if dtype == np.int8:
        # compiled, and imported here: numba takes longer to import than the compiler, which
        # packs no feature cubes
        from accel.layout_compiled import pack_lanes
        pack_lanes(x.astype(dtype, copy=False), view, np.array(pad_value).astype(dtype))
        return buf
    full = np.empty((view.shape[0] * view.shape[1], *shape[1:]), dtype=dtype)
    full[:layout.channels] = x.astype(dtype, copy=False)
    full[layout.channels:] = np.array(pad_value).astype(dtype)
    view[...] = full.reshape(view.shape)
    return buf


def unpack_feature(buf: np.ndarray | bytes, layout: CubeLayout) -> np.ndarray:
    """Inverse of :func:`pack_feature`: a [C, H, W] int8 (or int16) cube."""
    data = np.frombuffer(bytes(buf), dtype=np.uint8) if isinstance(buf, (bytes, bytearray)) \
        else np.asarray(buf, dtype=np.uint8)
    if data.size < layout.size:
        raise ValueError(f"buffer of {data.size} bytes is smaller than the cube ({layout.size})")
    view = _atom_view(np.ascontiguousarray(data), layout)
    cube = view.reshape(-1, layout.height, layout.width)   # a copy when strides leave gaps
    return np.array(cube[:layout.channels])


def dc_weight_order(k: int, c: int, r: int, s: int, cfg: HwConfig) -> np.ndarray:
    """Flat KCRS indices of the weights in direct-conv memory order."""
    ak, ac = cfg.atomic_k, cfg.atomic_c
    order = []
    kcrs = np.arange(k * c * r * s).reshape(k, c, r, s)
    for k0 in range(0, k, ak):
        ks = kcrs[k0:k0 + ak]
        for c0 in range(0, c, ac):
            block = ks[:, c0:c0 + ac]               # [kg, cb, R, S]
            # r -> s -> kernel -> channel, innermost last
            order.append(block.transpose(2, 3, 0, 1).reshape(-1))
    return np.concatenate(order)


def pack_dc_weights(w: np.ndarray, cfg: HwConfig, pad_to: int | None = None) -> np.ndarray:
    """Pack int8 KCRS weights into NVDLA's direct-convolution layout (uint8 buffer).

    The result is zero-padded to a multiple of ``pad_to`` bytes
    (``cfg.cbuf_entry_bytes`` by default).
    """
    w = np.asarray(w)
    if w.ndim != 4:
        raise ValueError(f"weights must be KCRS (4-D), got shape {w.shape}")
    order = dc_weight_order(*w.shape, cfg)
    flat = w.astype(np.int8).reshape(-1)[order].view(np.uint8)
    pad_to = cfg.cbuf_entry_bytes if pad_to is None else pad_to
    out = np.zeros(align_up(flat.size, pad_to), dtype=np.uint8)
    out[: flat.size] = flat
    return out


def unpack_dc_weights(buf: np.ndarray | bytes, shape: tuple[int, int, int, int],
                      cfg: HwConfig) -> np.ndarray:
    """Inverse of :func:`pack_dc_weights`: int8 weights of KCRS ``shape``."""
    data = np.frombuffer(bytes(buf), dtype=np.uint8) if isinstance(buf, (bytes, bytearray)) \
        else np.asarray(buf, dtype=np.uint8)
    n = int(np.prod(shape))
    if data.size < n:
        raise ValueError(f"weight buffer of {data.size} bytes is smaller than {shape} ({n})")
    order = dc_weight_order(*shape, cfg)
    out = np.empty(n, dtype=np.int8)
    out[order] = data[:n].view(np.int8)
    return out.reshape(shape)


def pack_sdp_operand(values: np.ndarray, cfg: HwConfig, elem_bytes: int = 2,
                     second: np.ndarray | None = None) -> np.ndarray:
    """Pack per-channel SDP operands (a 1 x 1 x C cube) read by SDP_RDMA.

    With ``second`` (BN's MUL operand) the two components are interleaved per
    element, ALU operand first: ``a0 b0 a1 b1 ...``.  Padded to whole atoms.
    """
    dtype = _element_dtype(elem_bytes)
    a = np.asarray(values, dtype=np.int64)
    if second is not None:
        b = np.asarray(second, dtype=np.int64)
        if b.shape != a.shape:
            raise ValueError(f"operand shapes differ: {a.shape} vs {b.shape}")
        a = np.stack([a, b], axis=-1).reshape(-1)
    info = np.iinfo(dtype)
    if a.size and (a.min() < info.min or a.max() > info.max):
        raise ValueError(f"SDP operand out of int{8 * elem_bytes} range: [{a.min()}, {a.max()}]")
    raw = a.astype(dtype).view(np.uint8)
    out = np.zeros(align_up(raw.size, cfg.atom_size), dtype=np.uint8)
    out[: raw.size] = raw
    return out


def unpack_sdp_operand(buf: np.ndarray | bytes, channels: int, elem_bytes: int = 2,
                       components: int = 1) -> np.ndarray:
    """Inverse of :func:`pack_sdp_operand`: shape [C] or [C, 2] for two components."""
    data = np.frombuffer(bytes(buf), dtype=np.uint8) if isinstance(buf, (bytes, bytearray)) \
        else np.asarray(buf, dtype=np.uint8)
    n = channels * components * elem_bytes
    vals = data[:n].copy().view(_element_dtype(elem_bytes))
    return vals.reshape(channels, components) if components == 2 else vals
