"""SDP_RDMA in per-kernel mode: the X1 (BRDMA) and X2 (NRDMA) operands of every kernel
group, before the convolution starts.

For every kernel group, the ``atomic_k`` elements of X1's and X2's packed 1x1xC operand
cubes - one or two 8/16-bit components each (ALU first) - are read and decoded into one
operand memory entry (:func:`accel.rtl.conv_layout.operand_layout`).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS, operand_layout, operand_write_layout
from accel.rtl.timing import kept, kept_copies, set_all

#: SDP_RDMA ``DATA_USE`` codes
USE_MUL, USE_ALU, USE_BOTH = 0, 1, 2
#: commands issued ahead of the stage whose words are taken next (the fetch's AXI reader
#: keeps four bursts in flight)
AHEAD = 4
#: lanes of an operand field decoded on one copy of the stage's format (two lanes' 32
#: registers on one copy were 11.5-13.0 ns, nearly all routing, in the full engine)
DECODE_LANES = 1


class OperandFetchLayout(data.StructLayout):
    """One SDP stage's operand DMA: on or off, base address, components, 16-bit or 8-bit."""

    def __init__(self) -> None:
        super().__init__({"fetch": 1, "addr": ADDR_BITS, "use": 2, "wide": 1})


class OperandFetch(wiring.Component):
    """See the module docstring.  ``go`` (a pulse, a cycle after ``launch``) starts the
    fetch; ``finished`` is high in its last cycle.  Per kernel group and stage that reads
    memory: a command for the stage's words (``cmd_*``, issued up to :data:`AHEAD` stages
    ahead), the words as they come (``receiving``: ``beat_*`` is taken, from ``go`` to the
    last word), every lane decoded in the cycle after the stage's last word (beside the
    next stage's first); a kernel group's operands are written the cycle after its last
    stage's decode.

    Attributes
    ----------
    x1, x2 : the stages' DMA registers (constant from launch); kernel_groups : their count
    launch, go : ``In(1)``; finished : ``Out(1)``
    cmd_valid, cmd_addr, cmd_beats : ``Out``; cmd_ready : ``In(1)``
    receiving : ``Out(1)``: the bus's words are this block's; beat_valid, beat_word : ``In``
    write : ``Out``: the operand memory's write port
    """

    def __init__(self, hw: HwConfig, x1, x2, kernel_groups, operand_entries: int) -> None:
        self.hw, self.x1, self.x2, self.kernel_groups = hw, x1, x2, kernel_groups
        super().__init__({
            "launch": In(1), "go": In(1), "finished": Out(1),
            "cmd_valid": Out(1), "cmd_ready": In(1), "cmd_addr": Out(ADDR_BITS),
            "cmd_beats": Out(3), "receiving": Out(1),
            "beat_valid": In(1), "beat_word": In(8 * hw.atom_size),
            "write": Out(operand_write_layout(hw, operand_entries)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        kg = Signal(SIZE_BITS)
        # the stage being received and decoded, and a kept copy of it for each operand
        # field's decode (the one register into every field's format copies was 11.0-11.6
        # ns, all routing, in the full engine)
        stage = Signal()
        field_stages = kept_copies("field_stage", 4)
        # bytes per element = bus words per kernel group, of each stage (registers of the
        # operation's registers: used from the operands on, cycles after start)
        sizes = []
        for operands in (self.x1, self.x2):
            size, both = Signal(3), operands.use == USE_BOTH
            m.d.sync += size.eq(Mux(operands.wide & both, 4, Mux(operands.wide | both, 2, 1)))
            sizes.append(size)
        esize = Signal(3)
        m.d.comb += esize.eq(Mux(stage, sizes[1], sizes[0]))
        word = Signal(2)
        # the words take the bus on kept copies of the receiving flag, one per word of the
        # raw buffer; the decode of a stage's fields in the cycle after its last word
        # (``stage_ends``), on a register of its own per group of lanes
        active = Signal()                          # from go to the last word
        receiving = kept_copies("receiving", 4)
        stage_ends = Signal()
        assembled = self._decode(m, field_stages, word, stage_ends, receiving)
        taken = Signal()                           # a command's words are taken from now on
        self._commands(m, taken, sizes)
        beat = Signal()
        last_word, last_stage, last_group = Signal(), Signal(), Signal()
        m.d.comb += [beat.eq(active & self.beat_valid),
                     last_word.eq(word == esize - 1),
                     # the group's last stage that reads memory: X2, or X1 when X2 reads none
                     last_stage.eq(stage | ~self.x2.fetch),
                     last_group.eq(kg == self.kernel_groups - 1),
                     taken.eq(beat & (word == 0)), stage_ends.eq(beat & last_word)]
        # a stage's words as they come (the bus holds nothing else while this block is
        # active), the next stage's as soon as its last is in: the decode of a stage takes
        # the cycle after its last word, beside the next stage's first
        decoded_last = Signal()                    # the decode is of a group's last stage
        decoded_kg = Signal.like(kg)
        m.d.sync += decoded_last.eq(0)
        with m.If(self.launch):
            m.d.sync += [kg.eq(0), word.eq(0),
                         *set_all([stage, *field_stages], ~self.x1.fetch)]
        with m.If(self.go):
            m.d.sync += [active.eq(1), *set_all(receiving, 1)]
        with m.If(beat):
            m.d.sync += word.eq(word + 1)
            with m.If(last_word):
                m.d.sync += [word.eq(0), decoded_last.eq(last_stage),
                             decoded_kg.eq(kg)]
                with m.If(last_stage):
                    m.d.sync += [kg.eq(kg + 1),
                                 *set_all([stage, *field_stages], ~self.x1.fetch)]
                    with m.If(last_group):
                        m.d.sync += [active.eq(0), *set_all(receiving, 0)]
                with m.Else():
                    m.d.sync += set_all([stage, *field_stages], 1)
        m.d.comb += [self.finished.eq(decoded_last & (decoded_kg == self.kernel_groups - 1)),
                     self.receiving.eq(active)]
        # a group's operands written the cycle after its last stage's decode, from
        # registers, beside the memory (the next group's decode ends a cycle later at the
        # earliest)
        write_en, write_kg = Signal(), Signal.like(kg)
        m.d.sync += [write_en.eq(decoded_last), write_kg.eq(decoded_kg)]
        ow = self.write
        m.d.comb += [ow.en.eq(write_en), ow.addr.eq(write_kg), ow.data.eq(assembled)]
        return m

    def _commands(self, m: Module, taken: Signal, sizes: list[Signal]) -> None:
        """The commands, one per kernel group and stage that reads memory, in the order
        the words are taken, up to :data:`AHEAD` ahead of the stage whose words are taken
        next (``taken``: the next command's are, from this cycle), so that the words come
        back to back rather than a command's round trip apart."""
        bus = self.hw.atom_size
        kg, stage, more = Signal(SIZE_BITS), Signal(), Signal()
        addrs = [Signal(ADDR_BITS, name="x1_addr"), Signal(ADDR_BITS, name="x2_addr")]
        ahead = Signal(range(AHEAD + 1))
        issue = Signal()
        first_stage = ~self.x1.fetch                # X2 when X1 reads nothing
        m.d.comb += [self.cmd_valid.eq(more & (ahead != AHEAD)),
                     issue.eq(self.cmd_valid & self.cmd_ready),
                     self.cmd_addr.eq(Mux(stage, addrs[1], addrs[0])),
                     self.cmd_beats.eq(Mux(stage, sizes[1], sizes[0]))]
        m.d.sync += ahead.eq(ahead + issue - taken)
        with m.If(issue):
            for i, (addr, size) in enumerate(zip(addrs, sizes, strict=True)):
                with m.If(stage == i):
                    m.d.sync += addr.eq(addr + size * bus)
            # the next stage that reads memory: this group's X2, or the next group's first
            with m.If(~stage & self.x2.fetch):
                m.d.sync += stage.eq(1)
            with m.Else():
                m.d.sync += [stage.eq(first_stage), kg.eq(kg + 1),
                             more.eq(kg != self.kernel_groups - 1)]
        with m.If(self.launch):
            m.d.sync += [kg.eq(0), stage.eq(first_stage), more.eq(0), ahead.eq(0),
                         addrs[0].eq(self.x1.addr), addrs[1].eq(self.x2.addr)]
        with m.If(self.go):
            m.d.sync += more.eq(1)

    def _decode(self, m: Module, field_stages, word, stage_ends, receiving) -> Signal:
        """The stage's words, then every lane decoded in one cycle: lane ``i``'s element is
        bytes ``[i * e, (i + 1) * e)`` of the words (``e`` bytes per element = words per
        kernel group, as the bus word is ``atomic_k`` bytes), one or two components of one
        or two bytes, ALU first.  ``field_stages``: the stage, a copy per operand field.
        Returns the kernel group's operands."""
        bus = self.hw.atom_size
        raw = Signal(4 * 8 * bus)
        assembled = Signal(operand_layout(self.hw))
        # word ``i`` of the stage loads whatever the bus holds while it is the next word
        # (``word`` steps on a valid beat only, so the last load before it steps is that
        # beat's): its enables are registers, not the bus's valid (the read slice's flag
        # into them across the die was 12.12 ns in the full engine)
        for i, bus_flag in enumerate(receiving):
            chunk = slice(8 * bus * i, 8 * bus * (i + 1))
            with m.If(bus_flag & (word == i)):
                m.d.sync += raw[chunk].eq(self.beat_word)
        # Each field's lanes, DECODE_LANES at a time, decode on their own kept copy of the
        # stage's format and their own enable (the stage's last word was in, and it is the
        # stage of their field), a cycle behind the stage (which moves on with the stage's
        # last word: the decode in the next cycle sees the format of the stage it decodes),
        # not on the stage's one net (nor one copy per field for its 128 bits: 13.02 ns,
        # nearly all routing, in the full engine; a field's flag and the group's stage test
        # combined beside the registers, 13.74); the format's choices decoded before their
        # copies (``first``: the field takes the element's first component, ``both``: the
        # element has two)
        fields = (("alu1", 0), ("mul1", 0), ("alu2", 1), ("mul2", 1))
        for (name, stage_of), stage in zip(fields, field_stages, strict=True):
            field = getattr(assembled, name)
            st = Signal(OperandFetchLayout(), name=f"{name}_stage_format")
            m.d.comb += st.eq(Mux(stage, self.x2.as_value(), self.x1.as_value()))
            if name.startswith("alu"):
                first_of = (st.use == USE_ALU) | (st.use == USE_BOTH)
            else:
                first_of = st.use == USE_MUL
            for lane in range(self.hw.atomic_k):
                if lane % DECODE_LANES == 0:
                    tag = f"{name}_{lane // DECODE_LANES}"
                    takes_first, both = (kept(f"decode_first_{tag}"),
                                         kept(f"decode_both_{tag}"))
                    wide, decode = kept(f"decode_wide_{tag}"), kept(f"decode_{tag}")
                    m.d.sync += [takes_first.eq(first_of), both.eq(st.use == USE_BOTH),
                                 wide.eq(st.wide),
                                 decode.eq(stage_ends & (stage == stage_of))]
                # the element's first and second components: 16-bit from 4-byte or 2-byte
                # elements, 8-bit from 2-byte or 1-byte ones
                e2, e4 = raw[16 * lane:16 * lane + 16], raw[32 * lane:32 * lane + 32]
                first = Mux(wide, Mux(both, e4[:16], e2).as_signed(),
                            Mux(both, e2[:8], raw[8 * lane:8 * lane + 8]).as_signed())
                if name.startswith("alu"):
                    new = Mux(takes_first, first, 0)
                else:
                    second = Mux(wide, e4[16:].as_signed(), e2[8:].as_signed())
                    new = Mux(takes_first, first, Mux(both, second, 0))
                with m.If(decode):
                    m.d.sync += field[lane].eq(new)
        return assembled
