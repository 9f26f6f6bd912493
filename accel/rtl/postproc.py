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
beat (``ALU_SRC`` / ``MUL_SRC`` = memory).  ``cfg`` must hold from two cycles
before an operation's first beat until its last beat is out.

Pipeline (:class:`LaneDatapath`): 27 register stages, each at most one carry
chain, one barrel shifter or one 18x18 product deep (the ECP5 build's target clock):
the input beat; CACC truncation (round, shift, saturate); X1 and X2 (ALU
compare and add, ALU choice, three for the product, round, shift, saturate and
ReLU); CVT (subtract, three for the product, round, shift, saturate).  The
product's first two stages are a multiplier's operand and product registers: on
ECP5 builds the sysDSP blocks' own (:func:`accel.rtl.cmac.ecp5_multiply`), so no
route between the fabric and a DSP column shares a cycle with a multiplication.  Every
stage moves every cycle; results wait in an output FIFO, and a beat enters
only while the FIFO has room promised for it, so ``out``'s back-pressure never
reaches the stages.  Saturation checks the bits above the range instead of
comparing with the bounds.  :class:`PostProcessor` runs it at SDP's
throughput, as NVDLA's configurations size SDP: nv_small computes one lane a
cycle (a beat of 8 lanes every 8 cycles), nv_medium_512 four.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cmac import DSP_PRODUCT_BITS, registered_multiply, use_ecp5_dsp
from accel.rtl.credits import credit_flags
from accel.rtl.timing import delayed, kept, registered_copies, registered_copy, stage

ACC_BITS = 34                # CACC_PARSUM_WIDTH
ALU_MAX, ALU_MIN, ALU_SUM = 0, 1, 2
MAX_ALU_SHIFT = 40           # larger operand shifts saturate the same way
PRODUCT_STAGES = 4           # a product of up to 35 x 16 bits (:func:`product_stages`)
X_STAGES = 5 + PRODUCT_STAGES    # an X stage: 2 of ALU, the product, 2 of rounding shift,
                                 # saturation
STAGES = 1 + 3 + 2 * X_STAGES + 4 + PRODUCT_STAGES   # the input register, CACC
                                                     # truncation, X1, X2, CVT


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


#: the parts of an input beat, each a value per lane (:class:`BeatLayout`)
BEAT_PARTS = ("acc", "alu1", "mul1", "alu2", "mul2")


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


def overflows(x: Value, bits: int) -> Value:
    """Whether signed ``x`` is outside the signed ``bits`` range: its bits from ``bits - 1``
    up are not all equal (a few LUT levels, where comparing against the bounds would take
    two carry chains)."""
    top = x.as_signed()[bits - 1:]
    return ~(top.all() | ~top.any())


def saturate(x: Value, bits: int) -> Value:
    """Signed ``x`` clamped to the signed ``bits`` range, as a ``signed(bits)`` value."""
    lo, hi = _bounds(bits)
    x = x.as_signed()
    return Mux(overflows(x, bits), Mux(x[-1], lo, hi), x[:bits].as_signed())[:bits].as_signed()


def round_carry(negative: Value, shift_is_zero: Value) -> Value:
    """Rounding half away from zero adds ``2**(shift-1) - (x < 0)`` before an arithmetic
    right shift, 0 for a shift of 0; as :func:`half_minus_one` (a constant of the
    operation) plus this carry: ``x >= 0``, or 1 (``-1 + 1``) for a shift of 0."""
    return Mux(shift_is_zero, 1, ~negative)


def half_minus_one(shift: Value, bits: int) -> Value:
    """``2**(shift-1) - 1`` as a signed ``bits``-bit value, -1 for a shift of 0.

    Bit by bit (bit ``i`` is set below ``shift - 1``): each bit a comparison of the shift
    with a constant, where a decode and a subtraction made a carry chain across all the
    bits."""
    return Cat(*((shift == 0) | (shift > i + 1) for i in range(bits))).as_signed()


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


class ShiftSettings:
    """A right shift from ``cfg`` as :func:`shift_round_stages` takes it, in registers
    (``cfg`` is constant through an operation): the shift clamped to its useful range
    (``name_shift``, a cycle after ``cfg``), whether it is 0 (``name_zero``, likewise) and
    its rounding constant (``name_half_m1``, a cycle later), for a signed ``bits``-bit
    value."""

    def __init__(self, m: Module, name: str, shift: Value, bits: int) -> None:
        # a shift of bits + 1 or more rounds every bits-bit value to 0, as bits + 1 does
        limit = bits + 1
        self.shift = Signal(range(limit + 1), name=f"{name}_shift")
        self.zero = Signal(name=f"{name}_zero")
        self.half_m1 = Signal(signed(bits + 2), name=f"{name}_half_m1")
        # two register stages: the clamped shift, then its rounding constant
        clamped = _clamped(shift, limit)
        m.d.sync += [self.shift.eq(clamped), self.zero.eq(clamped == 0),
                     self.half_m1.eq(half_minus_one(self.shift, bits + 2))]


def shift_round_stages(m: Module, name: str, x: Value, st: ShiftSettings, no_shift: Value,
                       bits: int) -> Value:
    """``x >> shift`` (``x`` of ``bits`` bits, ``st`` its settings) rounding half away from
    zero in two register stages ``name_*``: add the rounding term, then shift (the caller
    saturates); with ``no_shift`` set ``x`` passes unshifted.  Returns the shifted value
    (``bits + 2`` bits), two cycles after ``x``."""
    zero = st.zero | no_shift
    rounded = stage(m, f"{name}_rnd", x.as_signed() + Mux(zero, -1, st.half_m1)
                    + round_carry(x.as_signed()[-1], zero), signed(bits + 2))
    amount = stage(m, f"{name}_amt", Mux(no_shift, 0, st.shift))
    return stage(m, f"{name}_shr", rounded >> amount, signed(bits + 2))


def product_stages(m: Module, name: str, x: Value, operand: Value, ecp5_dsp: bool) -> Value:
    """``x * operand`` (``x`` up to 35 bits signed, ``operand`` 16 bits signed) in
    :data:`PRODUCT_STAGES` register stages ``name_*``: two 18x18 products of ``x``'s low 17
    bits (unsigned) and the rest, each with its operands and product in registers
    (:func:`accel.rtl.cmac.registered_multiply`; with ``ecp5_dsp`` those of two MULT18X18D
    blocks), the products in fabric registers (a DSP block's output straight into the
    fabric's adder was a 10.8-ns net in the full engine), then their sum.  Returns the
    product :data:`PRODUCT_STAGES` cycles after ``x``."""
    x, operand = x.as_signed(), operand.as_signed()
    parts = {"lo": x[:17].as_unsigned(), "hi": x[17:].as_signed()}
    products = {}
    for part, value in parts.items():
        product = Signal(signed(DSP_PRODUCT_BITS), name=f"{name}_{part}")
        registered_multiply(m, f"{name}_{part}_dsp", value, operand, product, ecp5_dsp)
        products[part] = stage(m, f"{name}_{part}_out", product)
    return stage(m, f"{name}_prod", (products["hi"] << 17) + products["lo"],
                 signed(len(x) + 16))


class LaneDatapath(wiring.Component):
    """``lanes`` lanes of CACC scaling, SDP X1/X2 and CVT, all in parallel, one beat per
    cycle; see the module docstring.

    Parameters
    ----------
    ecp5_dsp : bool, optional
        Multiply in ECP5 MULT18X18D blocks with their registers (:func:`product_stages`);
        default: when elaborated for an ECP5 platform.  ``True`` elsewhere needs a
        simulation model of the primitive.

    Attributes
    ----------
    cfg : ``In(ConfigLayout())``
        Register values of the running operation; must hold from two cycles before its
        first beat until its last beat is out.
    inp : ``In(stream.Signature(BeatLayout(cfg, lanes)))``
    out : ``Out(stream.Signature(ResultLayout(cfg, lanes)))``
    inp_ready_copies : ``Out(ready_copies)``, with ``ready_copies`` > 0: registers equal to
        ``inp.ready`` every cycle, one for each consumer the producer places apart
    """

    def __init__(self, cfg: HwConfig, lanes: int, ecp5_dsp: bool | None = None,
                 ready_copies: int = 0) -> None:
        self.hw, self.lanes, self.ecp5_dsp = cfg, lanes, ecp5_dsp
        self.ready_copies = ready_copies
        members = {
            "cfg": In(ConfigLayout()),
            "inp": In(stream.Signature(BeatLayout(cfg, lanes))),
            "out": Out(stream.Signature(ResultLayout(cfg, lanes))),
        }
        if ready_copies:
            members["inp_ready_copies"] = Out(ready_copies)
        super().__init__(members)

    @staticmethod
    def _x_stage(m: Module, name: str, ecp5: bool, st, s: ShiftSettings, x: Value,
                 alu_op: Value, mul_op: Value) -> Value:
        """One X stage (X1 or X2) of a lane, its registers ``name_*``: ALU, product, shift
        with rounding, saturation and ReLU; ``x`` and the operands enter together, the
        result leaves :data:`X_STAGES` cycles later."""
        # ALU (2 stages: compare and add, then choose): MAX / MIN / SUM of x and the
        # shifted, saturated operand
        # (the comparisons as the signs of exact differences, a carry chain each: as
        # ``x > alu_op`` yosys builds the greater one from the less one's chain and an
        # equality)
        x, alu_op = x.as_signed(), alu_op.as_signed()
        greater = stage(m, f"{name}_gt", (alu_op - x)[-1])
        less = stage(m, f"{name}_lt", (x - alu_op)[-1])
        total = stage(m, f"{name}_sum", x + alu_op)
        x, alu_op = stage(m, f"{name}_x", x), stage(m, f"{name}_aluop", alu_op)
        result = Mux(st.alu_algo == ALU_MAX, Mux(greater, x, alu_op),
                     Mux(st.alu_algo == ALU_MIN, Mux(less, x, alu_op), total))
        a = stage(m, f"{name}_alu", Mux(st.bypass | st.alu_bypass, x, result), signed(34))
        mul_op = delayed(m, f"{name}_mulop", mul_op, 2)
        # the multiplier; beside it, what the shift takes instead of the product: x itself
        # when the multiplier is bypassed (truncation only) or PReLU passes x >= 0
        product = product_stages(m, f"{name}_mul", a, mul_op, ecp5)
        passes = st.prelu & (a >= 0)
        take_x = delayed(m, f"{name}_take_x", st.mul_bypass | passes, PRODUCT_STAGES)
        no_shift = delayed(m, f"{name}_no_shift", ~st.mul_bypass & passes, PRODUCT_STAGES)
        a3 = delayed(m, f"{name}_a", a, PRODUCT_STAGES)
        z = Mux(take_x, a3, product)
        # shift with rounding (3 stages, see shift_round_stages), then saturate and ReLU
        shifted = shift_round_stages(m, name, z, s, no_shift, len(product))
        a_late = delayed(m, f"{name}_a_late", a3, 2)
        y = saturate(shifted, 32)
        y = Mux(st.relu_bypass | ~y[-1], y, 0)
        return stage(m, f"{name}_out", Mux(st.bypass, a_late, y), signed(32))

    def elaborate(self, platform) -> Module:
        m = Module()
        ecp5 = use_ecp5_dsp(self.ecp5_dsp, platform)
        # the beat, registered as it comes in (the stages after it start from registers)
        beat = Signal(BeatLayout(self.hw, self.lanes))
        m.d.sync += beat.eq(self.inp.payload)

        # cfg, registered once (it fans out to every stage) and the values derived from it
        cfg = Signal(ConfigLayout())
        m.d.sync += cfg.eq(self.cfg)
        trunc = ShiftSettings(m, "trunc", cfg.truncate, ACC_BITS)
        mul_s = {x: ShiftSettings(m, f"{x}_mul", getattr(cfg, x).mul_shift, 50)
                 for x in ("x1", "x2")}
        cvt_s = ShiftSettings(m, "cvt", cfg.cvt_shift, 49)

        # every stage moves every cycle; results wait in the output FIFO, and a beat is taken
        # only while the FIFO has a free entry for it (credits: entries not yet promised).
        # An entry's credit comes back a cycle after it leaves, from a register (the FIFO's
        # read, on the output writer's ready, runs across the die to the count at the
        # input), so a beat a cycle needs an entry more.
        depth = STAGES + 3
        m.submodules.results = results = fifo.SyncFIFOBuffered(
            width=Shape.cast(ResultLayout(self.hw, self.lanes)).width, depth=depth)
        take = self.inp.valid & self.inp.ready
        give = self.out.valid & self.out.ready
        ready, *copies = credit_flags(m, depth, take, give, late_give=True,
                                      copies=1 + self.ready_copies)
        m.d.comb += self.inp.ready.eq(ready)
        if copies:
            m.d.comb += self.inp_ready_copies.eq(Cat(copies))
        valid = take
        for i in range(STAGES):
            stage_valid = Signal(name=f"valid{i + 1}")
            m.d.sync += stage_valid.eq(valid)
            valid = stage_valid
        m.d.comb += [results.w_en.eq(valid), self.out.valid.eq(results.r_rdy),
                     results.r_en.eq(self.out.ready),
                     self.out.payload.eq(results.r_data)]
        out = Signal(ResultLayout(self.hw, self.lanes))
        m.d.comb += results.w_data.eq(out)

        for k in range(self.lanes):
            lane = f"lane{k}"              # the prefix of the lane's registers
            # operands: register or memory (a stage: the beat's registers across the die
            # into the choice and the shift were 11.28 ns in the full engine), the ALU's
            # shifted and saturated (2 stages) (each stage's registers a copy of its own
            # beside it, a cycle behind ``cfg``: ``cfg``'s one copy into the lane's operand
            # choice and shift was 13.86 ns in the full engine, 11.81 of them routing)
            ops, x_cfg = {}, {}
            for x, a_name, m_name in (("x1", "alu1", "mul1"), ("x2", "alu2", "mul2")):
                st = registered_copy(m, f"{lane}_{x}_ops_cfg", getattr(cfg, x))
                x_cfg[x] = registered_copy(m, f"{lane}_{x}_cfg", getattr(cfg, x))
                a16 = stage(m, f"{lane}_{x}_aluop_in", Mux(
                    st.alu_src, getattr(beat, a_name)[k], st.alu_operand).as_signed())
                shifted = stage(m, f"{lane}_{x}_aluop_shl",
                                a16 << _clamped(st.alu_shift, MAX_ALU_SHIFT))
                ops[x] = {"alu": stage(m, f"{lane}_{x}_aluop_sat", saturate(shifted, 32)),
                          "mul": delayed(m, f"{lane}_{x}_mulop_in", Mux(
                              st.mul_src, getattr(beat, m_name)[k], st.mul_operand), 3)}
            # CACC: round, shift, saturate to int32 (3 stages)
            shifted = shift_round_stages(m, f"{lane}_trunc", beat.acc[k], trunc, Const(0),
                                         ACC_BITS)
            t = stage(m, f"{lane}_trunc", saturate(shifted, 32))
            csat = stage(m, f"{lane}_csat", overflows(shifted, 32))
            x1_ops = ops["x1"]
            x1 = self._x_stage(m, f"{lane}_x1", ecp5, x_cfg["x1"], mul_s["x1"], t,
                               x1_ops["alu"], x1_ops["mul"])
            x2_ops = {n: delayed(m, f"{lane}_x2_ops_{n}", v, X_STAGES)
                      for n, v in ops["x2"].items()}
            x2 = self._x_stage(m, f"{lane}_x2", ecp5, x_cfg["x2"], mul_s["x2"], x1,
                               x2_ops["alu"], x2_ops["mul"])
            # CVT: subtract, product, round and shift (2), saturate
            diff = stage(m, f"{lane}_cvt_sub", x2 - cfg.cvt_offset, signed(33))
            prod = product_stages(m, f"{lane}_cvt_mul", diff, cfg.cvt_scale, ecp5)
            cvt = shift_round_stages(m, f"{lane}_cvt", prod, cvt_s, Const(0), len(prod))
            m.d.sync += [out.data[k].eq(saturate(saturate(cvt, 17), 8)),
                         out.cvt_sat[k].eq(overflows(cvt, 17))]
            m.d.sync += out.cacc_sat[k].eq(delayed(m, f"{lane}_csat", csat, STAGES - 5))
        return m


def lane_group_counts(groups: int) -> list[tuple]:
    """The copies of :class:`LaneGroups`' count of groups still to go: the handshakes' (no
    group, no part), then one per lane group and part of the beat (sums, X1's operands,
    X2's), as ``(group, part names, name suffix)``."""
    parts = (BEAT_PARTS[:1], BEAT_PARTS[1:3], BEAT_PARTS[3:])
    return [(None, (), "")] + [(i, part, f"{i}_{part[0]}") for i in range(groups)
                               for part in parts]


def memory_ready_copies(hw: HwConfig) -> int:
    """Copies of the ready of SDP's input from memory (``lane_inp``): one per count of its
    producer's :class:`LaneGroups` where lanes go in by groups, else none."""
    groups = hw.atomic_k // lanes_per_cycle(hw)
    return len(lane_group_counts(groups)) if groups > 1 else 0


class LaneGroups:
    """A beat (``payload``, :class:`BeatLayout`) handed on a lane group a cycle, from
    registers: the beat is taken into ``held`` (a :class:`BeatLayout` of
    :func:`lanes_per_cycle` lanes per group) as the one before it leaves, and the groups
    shift towards ``held[0]``, the group going out, one a cycle.

    Each group's sums, X1 operands and X2 operands decide their own take and shift from
    a copy of the count of groups still to go (:func:`lane_group_counts`; marked ``keep``:
    not one enable reaching every bit of the beat, nor one a group for sums and operands
    together: that enable, 64 bits of a group's operands, was the full engine's path at
    74 MHz), the copies all counting alike.  Beside each count, whether it is 0 and
    whether it is 1 are registers of the next count, so a take is one gate of four
    flip-flops: ``valid[c]`` and ``ready[c]`` are the offer and the consumer's ready as
    seen by copy ``c`` (copies of one signal, each placed beside its loads, or the
    signal itself repeated).

    ``valid`` (``Value``): a group is going out; ``ready``: the beat on ``payload`` is
    taken this cycle (the handshakes' copy's).  ``reset`` (optional): every count to 0.
    """

    def __init__(self, m: Module, hw: HwConfig, payload, valid: list, ready: list,
                 reset=None) -> None:
        n = lanes_per_cycle(hw)
        groups = hw.atomic_k // n
        counts = lane_group_counts(groups)
        assert len(valid) == len(ready) == len(counts)
        self.held = [Signal(BeatLayout(hw, n), name=f"held{i}") for i in range(groups)]
        self.takes = []
        for c, (i, names, suffix) in enumerate(counts):
            count = kept(f"left{suffix}", range(groups + 1))
            zero = kept(f"left{suffix}_zero", init=1)
            one = kept(f"left{suffix}_one")
            take = valid[c] & (zero | (one & ready[c]))
            step = ~zero & ready[c]
            self.takes.append(take)
            after = Signal.like(count, name=f"left{suffix}_next")
            m.d.comb += after.eq(Mux(take, groups, Mux(step, count - 1, count)))
            m.d.sync += [count.eq(after), zero.eq(after == 0), one.eq(after == 1)]
            if reset is not None:
                with m.If(reset):
                    m.d.sync += [count.eq(0), zero.eq(1), one.eq(0)]
            if i is None:                                   # the handshakes' copy
                self.valid = ~zero
                self.ready = zero | (one & ready[c])
            with m.If(take):
                for name in names:
                    src, dst = getattr(payload, name), getattr(self.held[i], name)
                    m.d.sync += [dst[j].eq(src[i * n + j]) for j in range(n)]
            with m.Elif(step):
                if i is not None and i < groups - 1:
                    m.d.sync += [getattr(self.held[i], name).eq(getattr(self.held[i + 1], name))
                                 for name in names]


class PostProcessor(wiring.Component):
    """A beat of ``atomic_k`` lanes through :class:`LaneDatapath` at SDP's throughput:
    :func:`lanes_per_cycle` lanes a cycle (``atomic_k / lanes_per_cycle`` cycles per
    beat; all lanes at once where SDP keeps up with the MAC array).  A beat is taken into
    registers whose lane groups enter the datapath one a cycle (the next beat is taken as
    the last group goes in); results are gathered into an output beat.  ``ecp5_dsp``: as
    for :class:`LaneDatapath`.

    Attributes
    ----------
    cfg : ``In(ConfigLayout())``
        Register values of the running operation.
    inp : ``In(stream.Signature(BeatLayout(cfg)))``
    out : ``Out(stream.Signature(ResultLayout(cfg)))``
    inp_valid_copies : ``In(valid_copies)``, with ``valid_copies=True`` where lanes go in
        by groups: copies of ``inp.valid``, one per copy of the group count (see
        :meth:`elaborate`), which the producer drives from registers of its own equal to
        ``inp.valid`` every cycle, each placed beside the logic it enables.
    lane_inp : ``In(stream.Signature(BeatLayout(cfg, lanes)))``, with ``lane_input``: a
        second input, a lane group at a time, taken instead of ``inp`` from a cycle after
        ``lane_select`` (``In(1)``) is set until a cycle after it is cleared (``inp``
        offers nothing then; neither input offers a beat as the select changes); each
        ``atomic_k / lanes`` groups make a beat on ``out``.  A producer that has the beat
        in its own registers hands it on a group a cycle, so no beat-wide bus meets
        ``inp``'s here.
    lane_ready_copies : ``Out(len(lane_group_counts(groups)))``, with ``lane_input`` where
        lanes go in by groups: ``lane_inp.ready``, each from a copy of the datapath's
        ready of its own, for a producer that hands its groups on with
        :class:`LaneGroups` (one per count).
    """

    def __init__(self, cfg: HwConfig, ecp5_dsp: bool | None = None,
                 valid_copies: bool = False, lane_input: bool = False) -> None:
        self.hw, self.ecp5_dsp, self.lane_input = cfg, ecp5_dsp, lane_input
        self.lanes = lanes_per_cycle(cfg)
        groups = cfg.atomic_k // self.lanes
        # the copies of the count of groups still to go in (see :class:`LaneGroups`)
        self.counts = lane_group_counts(groups)
        self.valid_copies = len(self.counts) if valid_copies and groups > 1 else 0
        members = {
            "cfg": In(ConfigLayout()),
            "inp": In(stream.Signature(BeatLayout(cfg))),
            "out": Out(stream.Signature(ResultLayout(cfg))),
        }
        if self.valid_copies:
            members["inp_valid_copies"] = In(self.valid_copies)
        if lane_input:
            members.update(lane_inp=In(stream.Signature(BeatLayout(cfg, self.lanes))),
                           lane_select=In(1))
            if groups > 1:
                members["lane_ready_copies"] = Out(len(self.counts))
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        n, k = self.lanes, self.hw.atomic_k
        groups = k // n
        # where lanes go in by groups, each copy of the group count (below) has a copy of
        # the datapath's ready of its own
        # (and as many for the lanes' other input's producer)
        copies = len(self.counts) * (2 if self.lane_input else 1) if groups > 1 else 0
        m.submodules.lanes = dp = LaneDatapath(self.hw, n, self.ecp5_dsp,
                                               ready_copies=copies)
        m.d.comb += dp.cfg.eq(self.cfg)
        if n == k:
            self._datapath_input(m, dp, self.inp.valid, self.inp.payload, self.inp.ready)
            wiring.connect(m, dp.out, wiring.flipped(self.out))
            return m
        # ---- in: the beat is taken into registers, a lane group each, and the groups shift
        # towards the datapath's input one a cycle, the next beat taken as the last goes in
        # (:class:`LaneGroups`).  Each count's take is from its own copy of the input's
        # valid where the producer gives copies (not SDP's valid across the die into every
        # lane group's count), and of the datapath's ready (not one credit flag to every
        # count, 17 on nv_small).
        valid = (list(self.inp_valid_copies) if self.valid_copies
                 else [self.inp.valid] * len(self.counts))
        ready = list(dp.inp_ready_copies)
        groups_in = LaneGroups(m, self.hw, self.inp.payload, valid,
                               ready[:len(self.counts)])
        if self.lane_input:
            # each with a copy of the select of its own, a cycle later (it holds through
            # an operation, whose first beat from memory comes many cycles after its
            # start): the one select into every copy was 11.90 ns in the full engine
            selects = registered_copies(m, "lane_select", self.lane_select, len(self.counts))
            m.d.comb += [copy.eq(r & select) for copy, r, select in
                         zip(self.lane_ready_copies, ready[len(self.counts):], selects,
                             strict=True)]
        self._datapath_input(m, dp, groups_in.valid, groups_in.held[0], self.inp.ready)
        m.d.comb += self.inp.ready.eq(groups_in.ready)
        # ---- out: gather the lane groups' results into a beat (from either input)
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

    def _datapath_input(self, m: Module, dp: LaneDatapath, valid, payload, ready) -> None:
        """The datapath's input: ``inp``'s lanes (``valid``, ``payload``), or ``lane_inp``'s
        while ``lane_select`` (with ``lane_input``); ``ready`` is ``inp``'s where all lanes
        go at once."""
        if not self.lane_input:
            m.d.comb += [dp.inp.valid.eq(valid), dp.inp.payload.eq(payload)]
            if self.lanes == self.hw.atomic_k:
                m.d.comb += ready.eq(dp.inp.ready)
            return
        # the handshake's and the payload's choices each from a registered copy of the
        # select of their own, a cycle later as the ready copies' (the select holds
        # through an operation): the select's one net into the payload's choice and on
        # through the valid into the datapath's credit copies was 16.30 ns in the full
        # engine
        pick, pick_payload = registered_copies(m, "lane_select_at", self.lane_select, 2)
        m.d.comb += [dp.inp.valid.eq(Mux(pick, self.lane_inp.valid, valid)),
                     dp.inp.payload.eq(Mux(pick_payload, self.lane_inp.payload, payload)),
                     self.lane_inp.ready.eq(dp.inp.ready & pick)]
        if self.lanes == self.hw.atomic_k:
            m.d.comb += ready.eq(dp.inp.ready & ~pick)
