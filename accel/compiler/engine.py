"""Engine operations: the lowered form of a subgraph, one record per hardware operation.

Lowering turns every node into a few of these; each names the regions it
reads and writes (:class:`accel.compiler.tensors.Region`), so memory planning
sees lifetimes and emission sees addresses.  They run in list order (the
emitter chains each operation to the previous one's completion).

* :class:`ConvOp` - a direct convolution (CDMA/CSC/CMAC/CACC) streaming into
  the SDP, which writes the result: conv + SDP are one hardware pipeline;
* :class:`SdpOp` - the SDP on a cube in memory (element-wise ops, activations,
  copies, rescaling);
* :class:`PdpOp` - pooling;
* :class:`CdpOp` - local response normalization.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.compiler.program import SdpProgram
from accel.compiler.tensors import Region


@dataclass(frozen=True, eq=False)
class Weights:
    """Packed direct-convolution weights of one operation (``WEIGHT_BYTES`` long)."""

    name: str
    data: bytes                     # packed and padded (accel.layout.pack_dc_weights)
    kernels: int
    bytes_per_kernel: int


@dataclass(frozen=True)
class CbufPlan:
    """How one convolution uses the CBUF (registers D_BANK, D_ENTRY_PER_SLICE, D_MISC_CFG)."""

    data_banks: int
    weight_banks: int
    entries_per_slice: int
    weight_reuse: bool = False          # weights are still in the CBUF from the previous op
    skip_weight_release: bool = False   # keep them for the next op


@dataclass(eq=False)
class ConvOp:
    name: str
    node: str
    src: Region
    dst: Region
    weights: Weights
    kernel: tuple[int, int, int, int]           # K, C, R, S
    stride: tuple[int, int]                     # y, x
    pads: tuple[int, int, int, int]             # top, left, bottom, right
    dilation: tuple[int, int]
    clip_truncate: int
    sdp: SdpProgram
    cbuf: CbufPlan
    pad_value: int = 0
    operands: dict[int, Region] = field(default_factory=dict)

    @property
    def out_hw(self) -> tuple[int, int]:
        return self.dst.layout.height, self.dst.layout.width

    @property
    def macs(self) -> int:
        k, c, r, s = self.kernel
        oh, ow = self.out_hw
        return k * c * r * s * oh * ow

    def reads(self) -> list[Region]:
        return [self.src, *self.operands.values()]

    def writes(self) -> list[Region]:
        return [self.dst]


@dataclass(eq=False)
class SdpOp:
    name: str
    node: str
    src: Region
    dst: Region
    program: SdpProgram
    operands: dict[int, Region] = field(default_factory=dict)   # node input index -> region
    reads_src: bool = True      # False: the source bytes do not matter (a zero fill)

    macs = 0

    def reads(self) -> list[Region]:
        return ([self.src] if self.reads_src else []) + list(self.operands.values())

    def writes(self) -> list[Region]:
        return [self.dst]


@dataclass(frozen=True)
class PdpSplit:
    """Split-width mode: ``n`` vertical slices with first/mid/last input and output widths."""

    n: int
    in_widths: tuple[int, int, int]
    out_widths: tuple[int, int, int]


@dataclass(eq=False)
class PdpOp:
    name: str
    node: str
    src: Region
    dst: Region
    method: str                                  # "avg" | "max" | "min"
    kernel: tuple[int, int]                      # h, w
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]              # top, left, bottom, right
    pad_value: int = 0                           # what one padded cell adds to an average
    split: PdpSplit | None = None

    macs = 0

    def reads(self) -> list[Region]:
        return [self.src]

    def writes(self) -> list[Region]:
        return [self.dst]


@dataclass(eq=False)
class CdpOp:
    name: str
    node: str
    src: Region
    dst: Region
    local_size: int
    lut: object                                   # accel.loadable.descriptors_aux.LutParam
    in_cvt: tuple[int, int, int]                  # offset, scale, shift
    out_cvt: tuple[int, int, int]
    sqsum_bypass: bool = False
    mul_bypass: bool = False
    extra: dict = field(default_factory=dict)

    macs = 0

    def reads(self) -> list[Region]:
        return [self.src]

    def writes(self) -> list[Region]:
        return [self.dst]


EngineOp = ConvOp | SdpOp | PdpOp | CdpOp


def as_int16(values: np.ndarray) -> np.ndarray:
    """Check and convert operand values to int16."""
    v = np.asarray(values, dtype=np.int64)
    if v.size and (v.min() < -(1 << 15) or v.max() >= (1 << 15)):
        raise ValueError(f"values outside int16: [{v.min()}, {v.max()}]")
    return v.astype(np.int16)
