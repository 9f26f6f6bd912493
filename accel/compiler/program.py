"""SDP programs: what the single data processor computes, as one typed value.

Every DLA op that touches data element by element (the SDP behind a
convolution, element-wise and activation ops, copies) is described by an
:class:`SdpProgram`: the X1 (BS) and X2 (BN) stages, the optional Y stage
(element-wise ALU/MUL and LUT, on presets with ``sdp_ew``), and the output
converter.  The same value is read twice, by two independent interpreters:

* :mod:`accel.compiler.emitter` writes it into ``dla_sdp_op_desc`` descriptors
  (the firmware then programs the registers and the cmodel computes);
* the op table's int8 CPU reference hands it to
  :func:`accel.golden.int8_ref.sdp_program_int8`, plain numpy written from
  NVDLA_FACTS section 3.

An operand names where its values come from: a register (``layer``), a
constant array the compiler stores in the loadable (``kernel``: one value per
channel, ``element``: one per element), or input ``source`` of the node (an
int8 activation the SDP reads through its RDMA).  Per stage the hardware has
one read DMA, so at most one of a stage's two operands comes from memory,
unless both are constants (stored interleaved, ALU value first); and the
stage's descriptor (``dla_sdp_op``) has one mode for both, so a stage's
operands come both from registers or both from memory.

Arithmetic of one X stage on a 32-bit input ``x`` (round = half away from zero)::

    x = x  op  sat32(alu << alu_shift)           ALU: sum | max | min (33-bit)
    x = sat32(round(x * mul / 2**truncate))      MUL (PReLU: only x < 0; x >= 0 passes)
    x = max(x, 0)                                 ReLU

and of the converter ``sat8(sat17(round((x - offset) * scale / 2**shift)))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.errors import AccelError

INT16 = (-(1 << 15), (1 << 15) - 1)
ALU_OPS = ("max", "min", "sum")          # hardware encoding 0, 1, 2
MODES = ("layer", "kernel", "element")   # SDP_OP_PER_LAYER, _PER_KERNEL, _PER_POINT
MAX_ALU_SHIFT = 63                       # BS_ALU_SHIFT_VALUE: 6 bits
MAX_TRUNCATE = 62                        # larger MUL shifts give 0 like 62
MAX_CVT_SHIFT = 63                       # CVT_SHIFT: 6 bits


class ProgramError(AccelError, ValueError):
    """An SDP program the hardware cannot run (the message names the stage and field)."""


@dataclass(frozen=True, eq=False)
class Operand:
    """Where an ALU or MUL operand comes from (see the module docstring)."""

    mode: str
    value: int = 0
    const: np.ndarray | None = None     # int16 values: [C] per kernel, [C, H, W] per element
    source: int | None = None           # node input index of an int8 activation

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ProgramError(f"operand mode {self.mode!r} not in {', '.join(MODES)}")
        kinds = (self.const is not None) + (self.source is not None)
        if self.mode == "layer":
            if kinds:
                raise ProgramError("a per-layer operand is a register value, not data")
            if not INT16[0] <= int(self.value) <= INT16[1]:
                raise ProgramError(f"per-layer operand {self.value} outside int16")
        elif kinds != 1:
            raise ProgramError(f"a per-{self.mode} operand needs exactly one of const / source")
        if self.const is not None:
            c = np.asarray(self.const)
            if c.size and (c.min() < INT16[0] or c.max() > INT16[1]):
                raise ProgramError(f"constant operand outside int16: [{c.min()}, {c.max()}]")
            if c.ndim != (1 if self.mode == "kernel" else 3):
                raise ProgramError(f"per-{self.mode} constant must be "
                                   f"{'[C]' if self.mode == 'kernel' else '[C, H, W]'}, "
                                   f"got shape {c.shape}")

    @property
    def in_memory(self) -> bool:
        return self.mode != "layer"

    @staticmethod
    def layer(value: int) -> Operand:
        return Operand("layer", value=int(value))

    @staticmethod
    def kernel(values: np.ndarray) -> Operand:
        return Operand("kernel", const=np.asarray(values, dtype=np.int64))

    @staticmethod
    def input(index: int, mode: str = "element") -> Operand:
        return Operand(mode, source=int(index))


@dataclass(frozen=True, eq=False)
class XStage:
    """One X stage (X1 = BS, X2 = BN).  ``alu_op`` None bypasses the ALU, ``mul`` None the MUL."""

    alu_op: str | None = None
    alu: Operand | None = None
    alu_shift: int = 0
    mul: Operand | None = None
    prelu: bool = False
    truncate: int = 0
    relu: bool = False

    def __post_init__(self) -> None:
        if (self.alu_op is None) != (self.alu is None):
            raise ProgramError("an X stage ALU needs both an operation and an operand")
        if self.alu_op is not None and self.alu_op not in ALU_OPS:
            raise ProgramError(f"ALU operation {self.alu_op!r} not in {', '.join(ALU_OPS)}")
        if not 0 <= self.alu_shift <= MAX_ALU_SHIFT:
            raise ProgramError(f"ALU shift {self.alu_shift} outside 0..{MAX_ALU_SHIFT}")
        if not 0 <= self.truncate <= MAX_TRUNCATE:
            raise ProgramError(f"MUL truncate {self.truncate} outside 0..{MAX_TRUNCATE}")
        if self.prelu and self.mul is None:
            raise ProgramError("PReLU mode needs a multiplier")
        used = [o for o in (self.alu, self.mul) if o is not None]
        if len({o.in_memory for o in used}) > 1:
            raise ProgramError("one X stage operand from a register and one from memory: the "
                               "stage descriptor has one mode for both")
        ops = [o for o in used if o.in_memory]
        if len(ops) == 2:
            a, m = ops
            if a.mode != m.mode or a.const is None or m.const is None \
                    or np.shape(a.const) != np.shape(m.const):
                raise ProgramError("both operands of one X stage come from memory: they must be "
                                   "constants of the same mode and shape (one read DMA, "
                                   "interleaved)")

    @property
    def memory_operands(self) -> list[Operand]:
        return [o for o in (self.alu, self.mul) if o is not None and o.in_memory]


@dataclass(frozen=True)
class Converter:
    """The SDP output converter ``(x - offset) * scale >> shift`` (int32, int16, 6 bits)."""

    offset: int = 0
    scale: int = 1
    shift: int = 0

    def __post_init__(self) -> None:
        if not INT16[0] <= self.scale <= INT16[1]:
            raise ProgramError(f"converter scale {self.scale} outside int16")
        if not 0 <= self.shift <= MAX_CVT_SHIFT:
            raise ProgramError(f"converter shift {self.shift} outside 0..{MAX_CVT_SHIFT}")
        if not -(1 << 31) <= self.offset < (1 << 31):
            raise ProgramError(f"converter offset {self.offset} outside int32")


@dataclass(frozen=True, eq=False)
class SdpProgram:
    """X1, X2 (each optional), the converter and, on presets with a LUT, a lookup table.

    ``lut`` is the ``dla_lut_param`` of the Y stage's table
    (:class:`accel.loadable.descriptors_aux.LutParam`, built by
    :mod:`accel.compiler.lut`): the emitter stores it in the task's LUT list,
    the reference evaluates it (:func:`accel.golden.int8_ref.sdp_lut_int8`);
    None: no Y stage.
    """

    x1: XStage | None = None
    x2: XStage | None = None
    cvt: Converter = field(default_factory=Converter)
    lut: object | None = None

    @property
    def stages(self) -> tuple[XStage | None, XStage | None]:
        return self.x1, self.x2

    def sources(self) -> list[int]:
        """Node inputs (other than the main input) the program reads through its RDMAs."""
        return [o.source for st in self.stages if st is not None
                for o in st.memory_operands if o.source is not None]

    def per_kernel_slice(self, k0: int, k1: int) -> SdpProgram:
        """The program for output channels ``[k0, k1)`` (per-kernel constants sliced)."""
        def cut(o: Operand | None) -> Operand | None:
            if o is None or o.mode != "kernel" or o.const is None:
                return o
            return Operand("kernel", const=np.asarray(o.const)[k0:k1])

        def stage(st: XStage | None) -> XStage | None:
            if st is None:
                return None
            return XStage(st.alu_op, cut(st.alu), st.alu_shift, cut(st.mul), st.prelu,
                          st.truncate, st.relu)
        return SdpProgram(stage(self.x1), stage(self.x2), self.cvt, self.lut)


IDENTITY = SdpProgram()
