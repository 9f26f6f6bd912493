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

Pipeline (:class:`LaneDatapath`): nine register stages (truncate, X1 ALU, X1
product, X1 shift/truncate/ReLU, X2 ALU, X2 product, X2 shift/..., CVT
product, CVT shift/saturate).  The
whole pipeline moves when its output register is empty or being read, with
``inp.ready`` low while ``out`` is stalled.  :class:`PostProcessor` runs it at
SDP's throughput, as NVDLA's configurations size SDP: nv_small computes one
lane a cycle (a beat of 8 lanes every 8 cycles), nv_medium_512 four.
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig

ACC_BITS = 34                # CACC_PARSUM_WIDTH
ALU_MAX, ALU_MIN, ALU_SUM = 0, 1, 2
MAX_ALU_SHIFT = 40           # larger operand shifts saturate the same way
MAX_SHIFT = 62               # larger right shifts of a <= 50-bit value all give 0 or -1 -> 0
STAGES = 9


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
    """Input beat: ``acc`` per lane and the per-lane memory operands of X1 and X2
    (``lanes``: ``atomic_k`` unless given)."""

    def __init__(self, cfg: HwConfig, lanes: int | None = None) -> None:
        lanes = cfg.atomic_k if lanes is None else lanes
        op = data.ArrayLayout(signed(16), lanes)
        super().__init__({"acc": data.ArrayLayout(signed(ACC_BITS), lanes),
                          "alu1": op, "mul1": op, "alu2": op, "mul2": op})


class ResultLayout(data.StructLayout):
    """Output beat: int8 per lane, and per lane whether CACC's int32 or CVT's 17-bit
    saturation clipped it."""

    def __init__(self, cfg: HwConfig, lanes: int | None = None) -> None:
        lanes = cfg.atomic_k if lanes is None else lanes
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


def lanes_per_cycle(cfg: HwConfig) -> int:
    """Lanes the datapath computes per cycle: SDP's throughput (``SDP_BS_THROUGHPUT`` and
    ``SDP_BN_THROUGHPUT``, elements per cycle; nv_small's is 1), as a divisor of
    ``atomic_k``."""
    rates = [r for r in (cfg.sdp_bs_throughput, cfg.sdp_bn_throughput) if r > 0]
    n = max(1, min([cfg.atomic_k, *rates]))
    while cfg.atomic_k % n:
        n -= 1
    return n


class LaneDatapath(wiring.Component):
    """``lanes`` lanes of CACC scaling, SDP X1/X2 and CVT, all in parallel, one beat per
    cycle; see the module docstring.

    Attributes
    ----------
    cfg : ``In(ConfigLayout())``
        Register values of the running operation.
    inp : ``In(stream.Signature(BeatLayout(cfg, lanes)))``
    out : ``Out(stream.Signature(ResultLayout(cfg, lanes)))``
    """

    def __init__(self, cfg: HwConfig, lanes: int) -> None:
        self.hw, self.lanes = cfg, lanes
        super().__init__({
            "cfg": In(ConfigLayout()),
            "inp": In(stream.Signature(BeatLayout(cfg, lanes))),
            "out": Out(stream.Signature(ResultLayout(cfg, lanes))),
        })

    def _x_alu(self, st, x: Value, mem_op: Value) -> Value:
        op16 = Mux(st.alu_src, mem_op, st.alu_operand)
        op = saturate(op16.as_signed() << _clamped(st.alu_shift, MAX_ALU_SHIFT), 32)
        result = Mux(st.alu_algo == ALU_MAX, Mux(x > op, x, op),
                     Mux(st.alu_algo == ALU_MIN, Mux(x < op, x, op), x + op))
        return Mux(st.bypass | st.alu_bypass, x, result)

    @staticmethod
    def _x_product(st, x: Value, mem_op: Value) -> Value:
        """The X multiplier's product (its own pipeline stage: the DSP blocks' delay)."""
        return x * Mux(st.mul_src, mem_op, st.mul_operand).as_signed()

    def _x_mul(self, st, x: Value, x_times_op: Value) -> Value:
        shift = _clamped(st.mul_shift, MAX_SHIFT)
        product = saturate(shift_round(x_times_op, shift), 32)
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

        for k in range(self.lanes):
            def reg(name: str, shape, k=k) -> Signal:
                return Signal(shape, name=f"{name}_{k}")

            # per stage: the value computed there, the operands still to come, CACC's flag
            t, cs1 = reg("s1_trunc", signed(32)), reg("s1_csat", 1)
            op_a1, op_m1 = reg("s1_alu1", signed(16)), reg("s1_mul1", signed(16))
            op_a2, op_m2 = reg("s1_alu2", signed(16)), reg("s1_mul2", signed(16))
            a1, cs2 = reg("s2_x1alu", signed(34)), reg("s2_csat", 1)
            m1_2, a2_2, m2_2 = (reg("s2_mul1", signed(16)), reg("s2_alu2", signed(16)),
                                reg("s2_mul2", signed(16)))
            p1, a1_3, cs3 = reg("s3_x1prod", signed(50)), reg("s3_x1alu", signed(34)), \
                reg("s3_csat", 1)
            a2_3, m2_3 = reg("s3_alu2", signed(16)), reg("s3_mul2", signed(16))
            x1, cs4 = reg("s4_x1", signed(32)), reg("s4_csat", 1)
            a2_4, m2_4 = reg("s4_alu2", signed(16)), reg("s4_mul2", signed(16))
            a2, cs5, m2_5 = reg("s5_x2alu", signed(34)), reg("s5_csat", 1), \
                reg("s5_mul2", signed(16))
            p2, a2_6, cs6 = reg("s6_x2prod", signed(50)), reg("s6_x2alu", signed(34)), \
                reg("s6_csat", 1)
            x2, cs7 = reg("s7_x2", signed(32)), reg("s7_csat", 1)
            prod, cs8 = reg("s8_cvt", signed(50)), reg("s8_csat", 1)
            out8, osat, cs9 = reg("s9_out", signed(8)), reg("s9_osat", 1), reg("s9_csat", 1)

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
                    # 3: X1 multiplier product
                    p1.eq(self._x_product(cfg.x1, a1, m1_2)), a1_3.eq(a1), cs3.eq(cs2),
                    a2_3.eq(a2_2), m2_3.eq(m2_2),
                    # 4: X1 shift, truncate, ReLU
                    x1.eq(self._x_mul(cfg.x1, a1_3, p1)), cs4.eq(cs3),
                    a2_4.eq(a2_3), m2_4.eq(m2_3),
                    # 5: X2 ALU
                    a2.eq(self._x_alu(cfg.x2, x1, a2_4)), cs5.eq(cs4), m2_5.eq(m2_4),
                    # 6: X2 multiplier product
                    p2.eq(self._x_product(cfg.x2, a2, m2_5)), a2_6.eq(a2), cs6.eq(cs5),
                    # 7: X2 shift, truncate, ReLU
                    x2.eq(self._x_mul(cfg.x2, a2_6, p2)), cs7.eq(cs6),
                    # 8: converter product
                    prod.eq((x2 - cfg.cvt_offset) * cfg.cvt_scale), cs8.eq(cs7),
                    # 9: converter shift, 17-bit then 8-bit saturation
                    out8.eq(saturate(saturate(cvt, 17), 8)), osat.eq(overflows(cvt, 17)),
                    cs9.eq(cs8),
                ]
            m.d.comb += [self.out.payload.data[k].eq(out8),
                         self.out.payload.cacc_sat[k].eq(cs9),
                         self.out.payload.cvt_sat[k].eq(osat)]
        m.d.comb += self.out.valid.eq(valid[-1])
        return m


class PostProcessor(wiring.Component):
    """A beat of ``atomic_k`` lanes through :class:`LaneDatapath` at SDP's throughput:
    :func:`lanes_per_cycle` lanes a cycle (``atomic_k / lanes_per_cycle`` cycles per
    beat; all lanes at once where SDP keeps up with the MAC array).  The beat is held
    while its lane groups enter the datapath, and the next one is taken as its last group
    goes in; results are gathered into an output beat.

    Attributes
    ----------
    cfg : ``In(ConfigLayout())``
        Register values of the running operation.
    inp : ``In(stream.Signature(BeatLayout(cfg)))``
    out : ``Out(stream.Signature(ResultLayout(cfg)))``
    """

    def __init__(self, cfg: HwConfig) -> None:
        self.hw = cfg
        self.lanes = lanes_per_cycle(cfg)
        super().__init__({
            "cfg": In(ConfigLayout()),
            "inp": In(stream.Signature(BeatLayout(cfg))),
            "out": Out(stream.Signature(ResultLayout(cfg))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        n, k = self.lanes, self.hw.atomic_k
        m.submodules.lanes = dp = LaneDatapath(self.hw, n)
        m.d.comb += dp.cfg.eq(self.cfg)
        if n == k:
            wiring.connect(m, wiring.flipped(self.inp), dp.inp)
            wiring.connect(m, dp.out, wiring.flipped(self.out))
            return m
        groups = k // n
        # ---- in: hold the beat, hand its lane groups over one by one
        held = Signal(BeatLayout(self.hw))
        have = Signal()
        g_in = Signal(range(groups))
        last_in = dp.inp.valid & dp.inp.ready & (g_in == groups - 1)
        m.d.comb += [self.inp.ready.eq(~have | last_in), dp.inp.valid.eq(have)]
        for name in ("acc", "alu1", "mul1", "alu2", "mul2"):
            src, dst = getattr(held, name), getattr(dp.inp.payload, name)
            for j in range(n):
                lane = Array(src[i * n + j] for i in range(groups))
                m.d.comb += dst[j].eq(lane[g_in])
        with m.If(dp.inp.valid & dp.inp.ready):
            m.d.sync += g_in.eq(Mux(g_in == groups - 1, 0, g_in + 1))
        with m.If(self.inp.valid & self.inp.ready):
            m.d.sync += [held.eq(self.inp.payload), have.eq(1)]
        with m.Elif(last_in):
            m.d.sync += have.eq(0)
        # ---- out: gather the lane groups' results into a beat
        full = Signal()
        g_out = Signal(range(groups))
        res = self.out.payload
        m.d.comb += [self.out.valid.eq(full), dp.out.ready.eq(~full | self.out.ready)]
        with m.If(self.out.valid & self.out.ready):
            m.d.sync += full.eq(0)
        with m.If(dp.out.valid & dp.out.ready):
            m.d.sync += g_out.eq(Mux(g_out == groups - 1, 0, g_out + 1))
            with m.If(g_out == groups - 1):
                m.d.sync += full.eq(1)
            with m.Switch(g_out):
                for i in range(groups):
                    with m.Case(i):
                        for j in range(n):
                            m.d.sync += [res.data[i * n + j].eq(dp.out.payload.data[j]),
                                         res.cacc_sat[i * n + j].eq(dp.out.payload.cacc_sat[j]),
                                         res.cvt_sat[i * n + j].eq(dp.out.payload.cvt_sat[j])]
        return m
