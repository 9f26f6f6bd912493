"""The convolution pipeline after the MAC array: CACC's output scaling, SDP X1 and X2, CVT.

One beat carries ``atomic_k`` lanes (one per output channel of a kernel
group), each a finished 34-bit accumulator value, with the per-channel X1/X2
operands SDP_RDMA would deliver alongside.  The arithmetic is the bit-exact
contract of NVDLA_FACTS section 3, the same as the cmodel's
(:func:`accel.cmod.cacc.clip_truncate`, :func:`accel.cmod.sdp.x_stage`,
:func:`accel.cmod.sdp.output_cvt`):

* CACC: ``>> CLIP_TRUNCATE`` with round half away from zero, saturate to int32;
* X stage (X1 = BS, X2 = BN), each bypassable: ALU (operand int16 ``<<``
  shift saturated to int32, then MAX / MIN / SUM, 33 bits), multiplier
  (x int16 operand; in PReLU mode only negative x), ``>>`` mul shift with
  round half away, saturate to int32 (also with the multiplier bypassed),
  ReLU;
* CVT: ``((x - offset) * scale) >> shift``, round half away, saturate to
  17 bits (flagged per lane: ``D_PERF_OUT_SATURATION``), then to int8.

Operands come from the ``cfg`` registers or, per stage and operand, from the
beat (``ALU_SRC`` / ``MUL_SRC`` = memory).  ``cfg`` must stay constant while
an operation's beats are in flight.

Pipeline: seven register stages (truncate, X1 ALU, X1 MUL/truncate/ReLU, X2
ALU, X2 MUL/..., CVT product, CVT shift/saturate).  The whole pipeline moves
when its output register is empty or being read: one beat per cycle, with
``inp.ready`` low while ``out`` is stalled.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig

ACC_BITS = 34                # CACC_PARSUM_WIDTH
ALU_MAX, ALU_MIN, ALU_SUM = 0, 1, 2
MAX_ALU_SHIFT = 40           # larger operand shifts saturate the same way
MAX_SHIFT = 62               # larger right shifts of a <= 50-bit value all give 0 or -1 -> 0
STAGES = 7


class StageLayout(data.StructLayout):
    """The registers of one X stage (``D_DP_BS_*`` / ``D_DP_BN_*``)."""

    def __init__(self) -> None:
        super().__init__({
            "bypass": 1, "alu_bypass": 1, "alu_algo": 2, "mul_bypass": 1, "prelu": 1,
            "relu_bypass": 1, "alu_src": 1, "alu_shift": 6, "alu_operand": signed(16),
            "mul_src": 1, "mul_shift": 8, "mul_operand": signed(16),
        })


class ConfigLayout(data.StructLayout):
    """The registers the pipeline reads: CACC's truncate, X1, X2 and the converter."""

    def __init__(self) -> None:
        super().__init__({
            "truncate": 5, "x1": StageLayout(), "x2": StageLayout(),
            "cvt_offset": signed(32), "cvt_scale": signed(16), "cvt_shift": 6,
        })


class BeatLayout(data.StructLayout):
    """Input beat: ``acc`` per lane and the per-lane memory operands of X1 and X2."""

    def __init__(self, cfg: HwConfig) -> None:
        lanes = cfg.atomic_k
        op = data.ArrayLayout(signed(16), lanes)
        super().__init__({"acc": data.ArrayLayout(signed(ACC_BITS), lanes),
                          "alu1": op, "mul1": op, "alu2": op, "mul2": op})


class ResultLayout(data.StructLayout):
    """Output beat: int8 per lane, and per lane whether CACC's int32 or CVT's 17-bit
    saturation clipped it."""

    def __init__(self, cfg: HwConfig) -> None:
        lanes = cfg.atomic_k
        super().__init__({"data": data.ArrayLayout(signed(8), lanes),
                          "cacc_sat": unsigned(lanes), "cvt_sat": unsigned(lanes)})


# ------------------------------------------------------------------ arithmetic
def _bounds(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def saturate(x: Value, bits: int) -> Value:
    """``x`` clamped to the signed ``bits`` range, as a ``signed(bits)`` value."""
    lo, hi = _bounds(bits)
    return Mux(x > hi, hi, Mux(x < lo, lo, x))[:bits].as_signed()


def overflows(x: Value, bits: int) -> Value:
    lo, hi = _bounds(bits)
    return (x > hi) | (x < lo)


def shift_round(x: Value, shift: Value) -> Value:
    """Arithmetic ``x >> shift`` rounding half away from zero (``shift`` unsigned; 0 keeps
    ``x``): ``(x + 2**(shift-1) - (x < 0)) >> shift``."""
    half = (Const(1, 1) << shift) >> 1
    neg = Mux(shift == 0, 0, x < 0)
    return (x + half - neg) >> shift


def _clamped(shift: Value, limit: int) -> Value:
    return Mux(shift > limit, limit, shift)[:limit.bit_length()]


class PostProcessor(wiring.Component):
    """``atomic_k`` lanes of CACC scaling, SDP X1/X2 and CVT; see the module docstring.

    Attributes
    ----------
    cfg : ``In(ConfigLayout())``
        Register values of the running operation.
    inp : ``In(stream.Signature(BeatLayout(cfg)))``
    out : ``Out(stream.Signature(ResultLayout(cfg)))``
    """

    def __init__(self, cfg: HwConfig) -> None:
        self.hw = cfg
        super().__init__({
            "cfg": In(ConfigLayout()),
            "inp": In(stream.Signature(BeatLayout(cfg))),
            "out": Out(stream.Signature(ResultLayout(cfg))),
        })

    def _x_alu(self, st, x: Value, mem_op: Value) -> Value:
        op16 = Mux(st.alu_src, mem_op, st.alu_operand)
        op = saturate(op16.as_signed() << _clamped(st.alu_shift, MAX_ALU_SHIFT), 32)
        result = Mux(st.alu_algo == ALU_MAX, Mux(x > op, x, op),
                     Mux(st.alu_algo == ALU_MIN, Mux(x < op, x, op), x + op))
        return Mux(st.bypass | st.alu_bypass, x, result)

    def _x_mul(self, st, x: Value, mem_op: Value) -> Value:
        op = Mux(st.mul_src, mem_op, st.mul_operand).as_signed()
        shift = _clamped(st.mul_shift, MAX_SHIFT)
        product = saturate(shift_round(x * op, shift), 32)
        multiplied = Mux(st.prelu & (x >= 0), saturate(x, 32), product)
        truncated = saturate(shift_round(x, shift), 32)
        y = Mux(st.mul_bypass, truncated, multiplied)
        y = Mux(st.relu_bypass | (y >= 0), y, 0)
        return Mux(st.bypass, x, y)

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, beat = self.cfg, self.inp.payload

        valid = [Signal(name=f"valid{i}") for i in range(1, STAGES + 1)]
        advance = Signal()        # every stage moves on: the output register is free
        m.d.comb += [advance.eq(~valid[-1] | self.out.ready), self.inp.ready.eq(advance)]
        with m.If(advance):
            m.d.sync += valid[0].eq(self.inp.valid)
            m.d.sync += [valid[i].eq(valid[i - 1]) for i in range(1, STAGES)]

        for k in range(self.hw.atomic_k):
            def reg(name: str, shape, k=k) -> Signal:
                return Signal(shape, name=f"{name}_{k}")

            # per stage: the value computed there, the operands still to come, CACC's flag
            t, cs1 = reg("s1_trunc", signed(32)), reg("s1_csat", 1)
            op_a1, op_m1 = reg("s1_alu1", signed(16)), reg("s1_mul1", signed(16))
            op_a2, op_m2 = reg("s1_alu2", signed(16)), reg("s1_mul2", signed(16))
            a1, cs2 = reg("s2_x1alu", signed(34)), reg("s2_csat", 1)
            m1_2, a2_2, m2_2 = (reg("s2_mul1", signed(16)), reg("s2_alu2", signed(16)),
                                reg("s2_mul2", signed(16)))
            x1, cs3 = reg("s3_x1", signed(32)), reg("s3_csat", 1)
            a2_3, m2_3 = reg("s3_alu2", signed(16)), reg("s3_mul2", signed(16))
            a2, cs4, m2_4 = reg("s4_x2alu", signed(34)), reg("s4_csat", 1), \
                reg("s4_mul2", signed(16))
            x2, cs5 = reg("s5_x2", signed(32)), reg("s5_csat", 1)
            prod, cs6 = reg("s6_cvt", signed(50)), reg("s6_csat", 1)
            out8, osat, cs7 = reg("s7_out", signed(8)), reg("s7_osat", 1), reg("s7_csat", 1)

            scaled = shift_round(beat.acc[k], cfg.truncate)
            cvt = shift_round(prod, cfg.cvt_shift)
            with m.If(advance):
                m.d.sync += [
                    # 1: CACC clip-truncate
                    t.eq(saturate(scaled, 32)), cs1.eq(overflows(scaled, 32)),
                    op_a1.eq(beat.alu1[k]), op_m1.eq(beat.mul1[k]),
                    op_a2.eq(beat.alu2[k]), op_m2.eq(beat.mul2[k]),
                    # 2: X1 ALU
                    a1.eq(self._x_alu(cfg.x1, t, op_a1)), cs2.eq(cs1),
                    m1_2.eq(op_m1), a2_2.eq(op_a2), m2_2.eq(op_m2),
                    # 3: X1 multiplier, truncate, ReLU
                    x1.eq(self._x_mul(cfg.x1, a1, m1_2)), cs3.eq(cs2),
                    a2_3.eq(a2_2), m2_3.eq(m2_2),
                    # 4: X2 ALU
                    a2.eq(self._x_alu(cfg.x2, x1, a2_3)), cs4.eq(cs3), m2_4.eq(m2_3),
                    # 5: X2 multiplier, truncate, ReLU
                    x2.eq(self._x_mul(cfg.x2, a2, m2_4)), cs5.eq(cs4),
                    # 6: converter product
                    prod.eq((x2 - cfg.cvt_offset) * cfg.cvt_scale), cs6.eq(cs5),
                    # 7: converter shift, 17-bit then 8-bit saturation
                    out8.eq(saturate(saturate(cvt, 17), 8)), osat.eq(overflows(cvt, 17)),
                    cs7.eq(cs6),
                ]
            m.d.comb += [self.out.payload.data[k].eq(out8),
                         self.out.payload.cacc_sat[k].eq(cs7),
                         self.out.payload.cvt_sat[k].eq(osat)]
        m.d.comb += self.out.valid.eq(valid[-1])
        return m
