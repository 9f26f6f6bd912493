"""What the blocks of the convolution pipeline share: the operation's registers
(:class:`ConvConfigLayout`), the stripes of output points, the SDP operands' and the
memories' write ports, and the widths of the sizes.

(Kept apart from the blocks so that CDMA, CSC, SDP and the engine that wires them import
it, not each other.)
"""

from __future__ import annotations

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from accel.config import HwConfig
from accel.rtl.postproc import ConfigLayout

#: bits of a bus address
ADDR_BITS = 32
#: bits of a size the registers give as a 13-bit field plus one (cube width, height and
#: channels, kernels, output width and height: up to 8192)
SIZE_BITS = 14
#: bits of a kernel width or height (5-bit field plus one: up to 32) and of a dilation
KERNEL_BITS = 6


class ConvConfigLayout(data.StructLayout):
    """The operation's registers: cube and kernel sizes, strides, dilation, padding, the
    post-processing, and four values the register decode and the fetch derive: the group
    counts (``ceil(C / atomic_c)``, ``ceil(K / atomic_k)``), the stripe length
    (:func:`stripe_points`) and the feature memory's layout (``rows_first``)."""

    def __init__(self) -> None:
        size = unsigned(SIZE_BITS)
        super().__init__({
            "c": size, "h": size, "w": size, "k": size, "r": KERNEL_BITS, "s": KERNEL_BITS,
            "stride_x": 4, "stride_y": 4, "dilation_x": KERNEL_BITS, "dilation_y": KERNEL_BITS,
            "pad_left": 5, "pad_top": 5, "out_w": size, "out_h": size,
            "channel_groups": size, "kernel_groups": size, "stripe_points": size,
            "pad_value": signed(8),
            "post": ConfigLayout(),
            "per_element": 2,        # X1 (bit 0) / X2 (bit 1) operands per element
            "rows_first": 1,         # the feature memory's layout (accel.rtl.dma.rows_first)
        })


def stripe_points(out_points: int, points: int) -> int:
    """Output points per stripe: at most ``points`` (the CACC's entries), and balanced so
    that no stripe is short: a short stripe's rounds would wait for the next kernels."""
    stripes = -(-out_points // points)
    return -(-out_points // stripes)


def operand_layout(cfg: HwConfig) -> data.StructLayout:
    """The SDP operands of one kernel group, per output channel (lane): X1's and X2's ALU
    and multiplier operands, as SDP_RDMA delivers them in per-kernel mode."""
    lane = data.ArrayLayout(signed(16), cfg.atomic_k)
    return data.StructLayout({"alu1": lane, "mul1": lane, "alu2": lane, "mul2": lane})


def operand_write_layout(cfg: HwConfig, entries: int) -> data.StructLayout:
    """The operand memory's write port: one kernel group's operands at ``addr``."""
    return data.StructLayout({"addr": range(entries), "data": operand_layout(cfg), "en": 1})


def write_layout(cfg: HwConfig, entries: int, groups: int = 1) -> data.StructLayout:
    """A memory write port: one entry of ``atomic_c`` lanes at ``addr``, in ``groups`` lane
    groups each written when its ``en`` bit is set."""
    return data.StructLayout({"addr": range(entries),
                              "data": data.ArrayLayout(signed(8), cfg.atomic_c), "en": groups})
