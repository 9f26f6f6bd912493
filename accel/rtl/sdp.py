"""SDP behind the CACC: the finished sums of each point through X1, X2 and CVT
(:class:`accel.rtl.postproc.PostProcessor`), with their per-kernel operands.

X1/X2 operands come from the registers, or (``ALU_SRC``/``MUL_SRC`` = memory) per output
channel from the operand memory, one entry per kernel group, as SDP_RDMA delivers them
in per-kernel mode (``operand_write``); the entry is read from block RAM into a
register, and SDP takes no beat in the two cycles after the kernel group changes.  A
stage whose operands come per element (``per_element``) takes them from ``elements``,
a beat's operands for each beat (:class:`~accel.rtl.element_operands.ElementOperands`),
queued in a two-entry slice: a beat is offered only once its operands are there.  The
int8 beats leave on ``out`` in the order the sums came: kernel group, then point.

NVDLA has one SDP for both of its inputs: while ``from_memory`` is set, the lanes come on
``memory`` instead (SDP reading its input cube from memory,
:class:`~accel.rtl.sdp_memory.SdpMemory` in its ``shared`` form), a lane group at a time
with their operands, into the same datapath (its ``lane_inp``) and out on ``out`` as
beats.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cacc import SumLayout
from accel.rtl.conv_layout import SIZE_BITS, operand_layout, operand_write_layout
from accel.rtl.credits import CountedFIFO, PointerSlice, credit_room
from accel.rtl.memories import NO_COLLISION
from accel.rtl.postproc import (
    BeatLayout,
    ConfigLayout,
    PostProcessor,
    ResultLayout,
    lanes_per_cycle,
    memory_ready_copies,
)
from accel.rtl.timing import kept, kept_copies, kept_like, registered_copy, set_all

#: the per-kernel operand memory's parts, one per operand field
OPERAND_FIELDS = ("alu1", "mul1", "alu2", "mul2")
#: parts of a beat's per-element operands with flags of their own (:class:`PointerSlice`)
ELEMENT_PARTS = 8


class Sdp(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    sum : ``In(stream.Signature(SumLayout(hw)))``, a point's sums from the CACC
    post : ``In(ConfigLayout())``, the post-processing registers
    start : ``In(1)``: an operation starts (the kernel group count restarts)
    points_m1, points_m2 : ``In``: the operation's output points less one / two, valid
    from the cycle ``counted`` is high on (before the first sum)
    operand_write : ``In``: a kernel group's operands from SDP_RDMA, written only
    before ``start``
    per_element : ``In(2)``: X1 (bit 0), X2 (bit 1) take their operands from ``elements``
    elements : ``In(stream.Signature(operand_layout(hw)))``: per-element operands, a beat's
    memory : ``In(stream.Signature(BeatLayout(hw, lanes_per_cycle(hw))))``, with
    ``memory_input``: SDP's input read from memory with its operands, a lane group at a
    time (the datapath's own rate), taken while ``from_memory``
    from_memory : ``In(1)``, with ``memory_input``: the operation is SDP's from memory
    (held from a cycle before its first beat to its last; no convolution runs then)
    memory_ready_copies : ``Out``, with ``memory_input`` where lanes go in by groups:
        ``memory.ready``, one per count of the producer's
        :class:`~accel.rtl.postproc.LaneGroups` (:class:`PostProcessor`'s
        ``lane_ready_copies``)
    out : ``Out(stream.Signature(ResultLayout(hw)))``
    """

    def __init__(self, hw: HwConfig, points: int, operand_entries: int,
                 ecp5_dsp: bool | None, memory_input: bool = False) -> None:
        self.hw, self.points, self.ecp5_dsp = hw, points, ecp5_dsp
        self.operand_entries, self.memory_input = operand_entries, memory_input
        members = {
            "sum": In(stream.Signature(SumLayout(hw))),
            "post": In(ConfigLayout()),
            "start": In(1),
            "points_m1": In(2 * SIZE_BITS), "points_m2": In(2 * SIZE_BITS), "counted": In(1),
            "operand_write": In(operand_write_layout(hw, operand_entries)),
            "per_element": In(2), "elements": In(stream.Signature(operand_layout(hw))),
            "out": Out(stream.Signature(ResultLayout(hw))),
        }
        if memory_input:
            members.update(memory=In(stream.Signature(BeatLayout(hw, lanes_per_cycle(hw)))),
                           from_memory=In(1))
            if memory_ready_copies(hw):
                members["memory_ready_copies"] = Out(memory_ready_copies(hw))
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        n_k = self.hw.atomic_k
        # the kernel group in SDP, counted in a kept register for each part of the operand
        # memory, its read address beside it (one count's bits into the address of every
        # block RAM of the memory were 11.4-13.1 ns, all routing, in the full engine)
        out_kgs = kept_copies("out_kg", len(OPERAND_FIELDS), SIZE_BITS)
        out_point = Signal(2 * SIZE_BITS, name="out_point")
        # the kernel group's last beat into SDP, flagged a beat ahead (first when the
        # point count is there: the first sums reach SDP many cycles later)
        last_out = Signal()
        m.submodules.post = post = PostProcessor(self.hw, ecp5_dsp=self.ecp5_dsp,
                                                 valid_copies=True,
                                                 lane_input=self.memory_input)
        m.d.comb += post.cfg.eq(self.post)
        # the operands of the kernel group in SDP are read two cycles after the kernel
        # group changes, and no beat enters SDP meanwhile (``settle``); whether SDP may
        # take a beat is a register, like every flag that decides it: the take enables a
        # whole beat of registers
        settle = Signal(range(3))
        settle_next = Signal.like(settle)
        # the per-element operands wait in a two-entry slice, each part of a beat's operands
        # on flags of its own (their producer's valid into the write enable of every bit of
        # a FIFO was the full engine's path at 76 MHz, the FIFO's one enable at 74 MHz),
        # whose entries stay in place: SDP's take is its ready (into a skid buffer's
        # enables, 12.16 ns in the full engine)
        m.submodules.elements = elements = PointerSlice(operand_layout(self.hw),
                                                        parts=ELEMENT_PARTS)
        wiring.connect(m, wiring.flipped(self.elements), elements.inp)
        # (a register: the operation's latched registers into the slice's enables were
        # 11.42 ns in the full engine; a beat moves many cycles after the start)
        per_element = registered_copy(m, "per_element", self.per_element.any())
        moved = post.inp.valid & post.inp.ready
        m.d.comb += elements.out.ready.eq(moved & per_element)
        # the beat counts, the settle count and the buffer's read step on ``stepped``
        # (whether a beat moved into SDP): where SDP takes a beat a cycle, on the take
        # itself; where it takes one every ``atomic_k / lanes`` >= 2 cycles, on the take a
        # cycle late, from a register (the take, one gate, fanned out across the die
        # into the counts, the settle count and the offer's copies: 13.58, 11.63 and
        # 13.02 ns in the full engine)
        if post.lanes == n_k:
            stepped = moved
            ops_ok = Signal(init=1)
            m.d.sync += ops_ok.eq(settle_next == 0)
            ok = ops_ok & (~per_element | elements.out.valid)
            m.d.comb += [post.inp.valid.eq(self.sum.valid & ok),
                         self.sum.ready.eq(post.inp.ready & ok)]
            m.d.comb += [post.inp.payload.acc[i].eq(self.sum.payload[i]) for i in range(n_k)]
        else:
            # (a copy for the counts, one for the buffer and the offer: one register into
            # both across the die was 10.9-11.1 ns in the full engine)
            stepped, delivered = kept("moved"), kept("moved_delivered")
            m.d.sync += [stepped.eq(moved), delivered.eq(moved)]
            self._deliver(m, post, settle, delivered, delivered & last_out,
                          ~per_element | (elements.level != 0))
        with m.If(self.start):
            m.d.sync += [*set_all(out_kgs, 0), out_point.eq(0)]
        with m.Elif(self.counted):
            m.d.sync += last_out.eq(self.points_m1 == 0)
        with m.Elif(stepped):
            # (compared before the increment, with the count less two, not an adder into
            # an equality)
            m.d.sync += [out_point.eq(out_point + 1),
                         last_out.eq(out_point == self.points_m2)]
            with m.If(last_out):
                m.d.sync += [out_point.eq(0), *(kg.eq(kg + 1) for kg in out_kgs),
                             last_out.eq(self.points_m1 == 0)]
        m.d.comb += settle_next.eq(Mux(self.start | (stepped & last_out), 2,
                                       Mux(settle != 0, settle - 1, 0)))
        m.d.sync += settle.eq(settle_next)
        ops = self._operands(m, out_kgs)
        beat_ops = elements.out.payload
        for stage, names in enumerate((("alu1", "mul1"), ("alu2", "mul2"))):
            for name in names:
                m.d.comb += [getattr(post.inp.payload, name)[i].eq(
                                 Mux(self.per_element[stage], getattr(beat_ops, name)[i],
                                     getattr(ops, name)[i]))
                             for i in range(n_k)]
        if self.memory_input:
            # the beats from memory, a lane group at a time into the datapath's input
            wiring.connect(m, wiring.flipped(self.memory), post.lane_inp)
            m.d.comb += post.lane_select.eq(registered_copy(m, "from_memory",
                                                            self.from_memory))
            if memory_ready_copies(self.hw):
                m.d.comb += self.memory_ready_copies.eq(post.lane_ready_copies)
        wiring.connect(m, post.out, wiring.flipped(self.out))
        return m

    def _deliver(self, m: Module, post: PostProcessor, settle: Signal, stepped: Signal,
                 group_end: Value, operands_next: Value) -> None:
        """SDP takes a beat every ``atomic_k / lanes`` cycles, the CACC empties a stripe at
        once: a stripe of sums waits in a buffer (CACC's delivery buffer) while the MAC
        array goes on with the next stripe.

        Unbuffered: SDP's input registers take the sums from the memory's output, a
        group's registers on their own enable.  The CACC's output is taken on credits for
        the buffer's entries, so the buffer's own level comparison is not the start of a
        path back through the CACC's stages.  ``stepped`` (a register) says that SDP took a
        beat in the cycle before: the buffer's read and its counts step a cycle after
        the take.  Whether SDP may take a beat (``offered``) is a register too: SDP takes
        a beat every ``atomic_k / lanes`` >= 2 cycles, so it is never ready in the cycle
        after a take; the flag need only be right in cycles after none, where the level
        has not gone down and the settle count has not restarted, and SDP's ready stays
        out of it.  In the cycle after a take (``stepped``) the buffer still counts the
        beat taken, and the settle count has not restarted where that beat ended its
        kernel group (``group_end``): the offer leaves both out.  ``operands_next``: the
        next beat's per-element operands (if any) will be there in the next cycle.
        """
        sums = self.sum.payload.as_value()
        # (no checks of its own: the credits and ``filled`` keep count)
        m.submodules.dbuf = dbuf = CountedFIFO(width=len(sums), depth=self.points)
        taken = Signal()
        filled, offered = Signal(range(self.points + 1)), Signal()
        m.d.sync += filled.eq(filled + taken - stepped)
        m.d.comb += [self.sum.ready.eq(credit_room(m, self.points, taken, stepped,
                                                   name="sum_credits")),
                     taken.eq(self.sum.valid & self.sum.ready)]
        m.d.comb += [dbuf.w_data.eq(sums), dbuf.w_en.eq(taken),
                     post.inp.valid.eq(offered), dbuf.r_en.eq(stepped),
                     post.inp.payload.acc.as_value().eq(dbuf.r_data)]
        # (a sum taken in this cycle is offered a cycle later, from the count: the CACC's
        # handshake into the offered flags' copies across the die was the full engine's
        # path at 76 MHz; a stripe's first beat waits a cycle more)
        offer_next = ((filled != stepped) & ~self.start & (settle <= 1) & ~group_end
                      & operands_next)
        m.d.sync += offered.eq(offer_next)
        # SDP's copies of it, one per register group it enables
        offered_copies = kept_copies("offered", post.valid_copies)
        m.d.sync += set_all(offered_copies, offer_next)
        m.d.comb += post.inp_valid_copies.eq(Cat(offered_copies))

    def _operands(self, m: Module, kernel_groups: list[Signal]) -> Signal:
        """The per-kernel SDP operands of the kernel group, from block RAM into a register:
        a memory for each operand field (:data:`OPERAND_FIELDS`), read at its own copy of
        the kernel group's count (``kernel_groups``).

        The memories are written only before start, while the fetch brings the operands
        in; a read then may return anything on the board (:data:`NO_COLLISION`): nothing
        uses it before the settle cycles after start.  Each write goes in from kept
        registers of its own, a cycle after the fetch's, beside its memory; the last
        kernel group's write lands the cycle the core starts, and the first read the
        datapath uses is two cycles later.
        """
        layout = operand_layout(self.hw)
        ops = Signal(layout)
        ow = self.operand_write
        for name, kernel_group in zip(OPERAND_FIELDS, kernel_groups, strict=True):
            omem = memory.Memory(shape=layout[name].shape, depth=self.operand_entries,
                                 init=[])
            m.submodules[f"operands_{name}{NO_COLLISION}"] = omem
            port = omem.write_port()
            w_addr = kept_like(ow.addr, f"operand_{name}_write_addr")
            w_data = kept(f"operand_{name}_write_data", layout[name].shape.size)
            w_en = kept_like(ow.en, f"operand_{name}_write_en")
            m.d.sync += [w_addr.eq(ow.addr), w_data.eq(getattr(ow.data, name)),
                         w_en.eq(ow.en)]
            m.d.comb += [port.addr.eq(w_addr), port.data.eq(w_data), port.en.eq(w_en)]
            read = omem.read_port()
            m.d.sync += getattr(ops, name).eq(read.data)
            m.d.comb += read.addr.eq(kernel_group)
        return ops
