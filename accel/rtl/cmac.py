"""CMAC: a pipelined ``atomic_c x atomic_k`` int8 multiply-accumulate array.

The array mirrors NVDLA's CMAC (CMAC_A + CMAC_B seen as one unit): every cell
holds one kernel of ``atomic_c`` int8 weights, and each cycle one feature atom
of ``atomic_c`` int8 values is broadcast to all ``atomic_k`` cells.  Each cell
outputs the exact sum of its ``atomic_c`` products, ``cfg.mac_result_bits``
(16 + log2(atomic_c)) bits wide, so the sum can never overflow.  Lanes whose
data mask or weight mask is 0 contribute nothing, as in the cmodel's
``calculation_int8`` (:func:`accel.cmod.cmac.mac_atoms` is the reference).

Weights are loaded like NVDLA's ``sc2mac_wt`` interface: one kernel per beat
on the ``weight`` port, addressed by its cell index, and held in the cells
until overwritten.  Ordering rule: an atom accepted in cycle *t* is multiplied
by the kernels as updated by every weight beat accepted up to and including
cycle *t*.  The ``weight`` port is ready exactly when the ``data`` port is, so
a producer sends an atom together with (or after) the last kernel it needs.

With ``shadow=True`` (NVDLA's CMAC keeps a shadow copy of the kernels) the
weight beats fill a second bank while the first one computes, and an atom
whose ``swap`` bit is set makes the shadow bank, as loaded by the beats of
the cycles before, the active one for itself and the atoms after it: the
next kernels load while the current ones are in use, so loading costs no
cycles once an atom stream is at least ``atomic_k`` atoms long.

Pipeline (latency ``5 + log2(atomic_c)`` cycles to the output FIFO)::

    data -> [mask, input reg] -> [a copy of the lanes per cell] -> [operand regs: lane,
         weights[k]] -> [products reg] -> [the products' copies] -> [adder level 1 reg]
         -> ... -> [adder level L reg] -> output FIFO -> result

On ECP5 builds the operand and product registers are the registers of the sysDSP
blocks themselves (input registers, output register: :func:`ecp5_multiply`; with
shadow kernels the blocks' weight registers are the active kernels, taking the
shadow bank on a swap and holding otherwise).  The lanes' copies and the products'
copies, fabric registers, give the routes from the input register to the blocks
and from a block to the adders of its cell (a cell's blocks may sit far apart in
the DSP rows) a flip-flop on the way.

The input register's copies cut the broadcast of each lane to ``atomic_k``
multipliers (spread over the DSP columns) in two: each cell's copy (marked
``keep``, which the FPGA flow honours, see :data:`fpga.build.KEEP_REGISTERS`) is
placed between the input register and its multiplier.  In the whole engine the
route from the input register into the blocks is long (the blocks sit across the
die), hence the fabric copies
ahead of them.  Every stage moves every cycle (no enable fans out to the thousands
of product and sum bits); results wait in the output FIFO of :func:`capacity`
entries, and the array takes an atom only while an entry is free for it, counting
atoms in flight (:func:`accel.rtl.credits.credit_room`), so a stalled ``result``
(ready low) stops the input without losing or duplicating an atom, and
``data.ready`` is a register, independent of ``result.ready`` within the cycle.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Instance, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.credits import PartedFIFO, credit_room
from accel.rtl.timing import kept, kept_like

#: Bits of one int8 operand (the v2 configurations are int8-only).
OPERAND_BITS = 8


def _check_int8(cfg: HwConfig) -> None:
    if not cfg.weight_data_type_int8 or not cfg.feature_data_type_int8:
        raise ValueError(f"{cfg.name}: the RTL CMAC implements int8 only; the config has "
                         f"feature int8={cfg.feature_data_type_int8}, "
                         f"weight int8={cfg.weight_data_type_int8}")


class DataAtomLayout(data.StructLayout):
    """Payload of the ``data`` stream: one feature atom.

    Fields: ``data`` (``atomic_c`` x signed 8) and ``mask`` (``atomic_c`` bits,
    bit *i* = 1 when lane *i* holds data).  Lane *i* sits at bits
    ``[8*i, 8*i+8)`` of ``data``.
    """

    def __init__(self, cfg: HwConfig, shadow: bool = False) -> None:
        fields = {"data": data.ArrayLayout(signed(OPERAND_BITS), cfg.atomic_c),
                  "mask": unsigned(cfg.atomic_c)}
        if shadow:
            fields["swap"] = 1   # this atom and the next use the shadow kernels
        super().__init__(fields)


class WeightLayout(data.StructLayout):
    """Payload of the ``weight`` stream: one kernel for one cell.

    Fields: ``data`` (``atomic_c`` x signed 8 weights), ``mask`` (``atomic_c``
    bits, 0 = skipped weight) and ``kernel`` (cell index, ``0..atomic_k-1``).
    """

    def __init__(self, cfg: HwConfig) -> None:
        super().__init__({
            "data": data.ArrayLayout(signed(OPERAND_BITS), cfg.atomic_c),
            "mask": unsigned(cfg.atomic_c),
            "kernel": range(cfg.atomic_k),
        })


class ResultLayout(data.ArrayLayout):
    """Payload of the ``result`` stream: ``atomic_k`` signed sums of
    ``mac_result_bits`` bits; cell *k* at bits ``[k*R, (k+1)*R)``."""

    def __init__(self, cfg: HwConfig) -> None:
        super().__init__(signed(cfg.mac_result_bits), cfg.atomic_k)


class CmacSignature(wiring.Signature):
    """Ports of :class:`Cmac` for one configuration (seen from the CMAC).

    Members
    -------
    data : ``In(stream.Signature(DataAtomLayout(cfg)))``
        Feature atoms in; ``valid``/``payload`` are inputs, ``ready`` an output.
    weight : ``In(stream.Signature(WeightLayout(cfg)))``
        Kernel loads in; ``valid``/``payload`` are inputs, ``ready`` an output
        (equal to ``data.ready``).
    result : ``Out(stream.Signature(ResultLayout(cfg)))``
        Sums out; ``valid``/``payload`` are outputs, ``ready`` an input.
    """

    def __init__(self, cfg: HwConfig, shadow: bool = False) -> None:
        _check_int8(cfg)
        self.cfg, self.shadow = cfg, shadow
        super().__init__({
            "data": In(stream.Signature(DataAtomLayout(cfg, shadow))),
            "weight": In(stream.Signature(WeightLayout(cfg))),
            "result": Out(stream.Signature(ResultLayout(cfg))),
        })

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (other.cfg, other.shadow) == (self.cfg, self.shadow)

    def __hash__(self) -> int:
        return hash((type(self), self.cfg, self.shadow))


def pipeline_depth(cfg: HwConfig) -> int:
    """Register stages between ``data`` and the output FIFO: input, the lanes' copies per
    cell, the multipliers' operands, products, the products' copies, one per adder level."""
    return 5 + (cfg.atomic_c.bit_length() - 1)


def capacity(cfg: HwConfig) -> int:
    """Atoms the array holds when ``result`` is stalled: its output FIFO's entries, enough
    for the stages and the FIFO's own latency, so that the array takes an atom every cycle
    while ``result`` is ready."""
    return pipeline_depth(cfg) + 3


#: MULT18X18D (ECP5 sysDSP) operand and product widths
DSP_OPERAND_BITS, DSP_PRODUCT_BITS = 18, 36


def use_ecp5_dsp(choice: bool | None, platform: object) -> bool:
    """Whether a component multiplies in ECP5 sysDSP blocks: ``choice`` when given, else
    when it is elaborated for an ECP5 platform."""
    return choice if choice is not None else getattr(platform, "family", None) == "ecp5"


def ecp5_multiply(m: Module, name: str, a: Value, b: Value, product: Signal,
                  b_enable: Value | None = None) -> None:
    """``product`` = ``a`` x ``b`` (signed) two cycles after ``a`` and ``b``, in an ECP5
    MULT18X18D: both operands through the block's input registers, the product through its
    output register.  The same timing as a register on each operand and one on the
    product in fabric, without the routes from fabric registers into the DSP column and
    back in the cycle of the multiplication.  (nextpnr times a block with one input
    registered and the other not as if neither were.)  ``b_enable``: ``b``'s register
    takes ``b`` only in cycles where it is 1 (on the block's CE1) and holds otherwise."""
    a18 = Signal(signed(DSP_OPERAND_BITS), name=f"{name}_a")
    b18 = Signal(signed(DSP_OPERAND_BITS), name=f"{name}_b")
    p36 = Signal(signed(DSP_PRODUCT_BITS), name=f"{name}_p")
    m.d.comb += [a18.eq(a), b18.eq(b), product.eq(p36)]
    ports = {f"i_{pin}{i}": value[i] for pin, value in (("A", a18), ("B", b18))
             for i in range(DSP_OPERAND_BITS)}
    ports.update({f"i_C{i}": 0 for i in range(DSP_OPERAND_BITS)})
    ports.update({f"o_P{i}": p36[i] for i in range(DSP_PRODUCT_BITS)})
    ports.update({f"i_CE{i}": 1 for i in range(4)})
    ports.update({f"i_RST{i}": 0 for i in range(4)})
    if b_enable is not None:
        ports["i_CE1"] = b_enable
    m.submodules[name] = Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_OUTPUT_CLK="CLK0",
        p_REG_INPUTB_CE="CE0" if b_enable is None else "CE1", p_GSR="DISABLED",
        i_CLK0=ClockSignal("sync"), i_SIGNEDA=1, i_SIGNEDB=1, i_SOURCEA=0, i_SOURCEB=0,
        **ports)


def registered_multiply(m: Module, name: str, a: Value, b: Value, product: Signal,
                        ecp5: bool, b_enable: Value | None = None) -> None:
    """``product`` = ``a`` x ``b`` two cycles after ``a`` and ``b``, with the multiplier's
    operands and product in registers beside it: on ECP5 the DSP block's own
    (:func:`ecp5_multiply`; the operands must fit 17 bits unsigned), elsewhere fabric
    registers kept apart (``keep``) so that each multiplier keeps its own.  ``b_enable``:
    as for :func:`ecp5_multiply`, ``b``'s register takes ``b`` only where it is 1."""
    if ecp5:
        ecp5_multiply(m, name, a, b, product, b_enable=b_enable)
        return
    ra = kept_like(a, f"{name}_a")
    rb = kept_like(b, f"{name}_b")
    m.d.sync += [ra.eq(a), product.eq(ra * rb)]
    if b_enable is None:
        m.d.sync += rb.eq(b)
    else:
        with m.If(b_enable):
            m.d.sync += rb.eq(b)


class Cmac(wiring.Component):
    """Pipelined int8 MAC array; see the module docstring for the protocol.

    Parameters
    ----------
    cfg : HwConfig
        ``atomic_c`` (lanes per cell) and ``atomic_k`` (cells) come from here.
    shadow : bool
        Shadow kernels (see the module docstring).
    ecp5_dsp : bool, optional
        Multiply in ECP5 MULT18X18D instances with their registers (:func:`ecp5_multiply`)
        instead of fabric registers around a ``*``.  Default: when elaborated for an ECP5
        platform.  ``True`` elsewhere needs a simulation model of the primitive.

    Attributes
    ----------
    data : stream interface, in
        Feature atoms (:class:`DataAtomLayout`).
    weight : stream interface, in (``ready`` equals ``data.ready``)
        Kernel loads (:class:`WeightLayout`).
    result : stream interface, out
        Cell sums (:class:`ResultLayout`).
    """

    def __init__(self, cfg: HwConfig, shadow: bool = False,
                 ecp5_dsp: bool | None = None) -> None:
        self.cfg, self.shadow, self.ecp5_dsp = cfg, shadow, ecp5_dsp
        super().__init__(CmacSignature(cfg, shadow))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        n_c, n_k = cfg.atomic_c, cfg.atomic_k
        levels = n_c.bit_length() - 1
        product_bits = 2 * OPERAND_BITS

        # Every stage moves every cycle; results wait in the output FIFO, and an atom (and
        # a weight beat, see the ordering rule) is taken only while the FIFO has an entry
        # promised for it (credits: entries no atom in flight holds).  ``result``'s
        # back-pressure so never reaches the stages: no enable fans out to the products.
        # Stage 0 is the input register, stage 1 its copies per cell, stage 2 the
        # multipliers' operand registers, stage 3 the products, stage 4 their copies,
        # stages 5..L+4 the adder levels.
        last = levels + 4
        depth = capacity(cfg)
        # (in parts of two lanes, each with pointers of its own: see PartedFIFO)
        m.submodules.results = results = PartedFIFO(
            width=len(self.result.payload.as_value()), depth=depth, parts=max(1, n_k // 2))
        take = self.data.valid & self.data.ready
        give = self.result.valid & self.result.ready
        room = credit_room(m, depth, take, give)
        m.d.comb += [self.data.ready.eq(room), self.weight.ready.eq(room)]
        valid = [Signal(name=f"stage{s}_valid") for s in range(last + 1)]
        m.d.sync += valid[0].eq(take)
        m.d.sync += [valid[s].eq(valid[s - 1]) for s in range(1, last + 1)]

        # An atom taken in cycle t is in the lanes' copies in cycle t+2, when the
        # multipliers' operand registers take it together with the kernels of that cycle.
        # Weight beats are registered first (``wbeat``: the write enables, which fan out to
        # every weight bit, start at flip-flops).  Masked weights are stored as 0, so a
        # masked weight lane yields a zero product with no mask later.
        wbeat = Signal.like(self.weight.payload, name="wbeat")
        w_take = Signal()
        m.d.sync += [wbeat.eq(self.weight.payload),
                     w_take.eq(self.weight.valid & self.weight.ready)]
        masked = Cat(Mux(wbeat.mask[c], wbeat.data[c], 0) for c in range(n_c))
        kernels = [Signal(data.ArrayLayout(signed(OPERAND_BITS), n_c), name=f"wt_{k}")
                   for k in range(n_k)]
        swaps: list[Value | None] = [None] * n_k
        if self.shadow:
            # Beats fill the shadow bank (``kernels``) a cycle later still, so that in
            # cycle t+2 it holds the beats of the cycles before t; the operand registers of
            # cell k take it only when a swap atom reaches them (``swap_k``, one register
            # per cell, ``keep``, beside its multipliers) and hold the active kernel
            # otherwise: no multiplexer between a register and a DSP block.
            # That cycle is a copy of the beat per cell (``keep``), its masked weights and
            # whether it is the cell's, placed between ``wbeat`` and the cell's kernels,
            # rather than ``wbeat`` straight into the kernels of every cell across the DSP
            # rows.
            swap_taken = Signal()
            m.d.sync += swap_taken.eq(take & self.data.payload.swap)
            for k in range(n_k):
                swaps[k] = kept(f"swap_k{k}")
                beat = kept(f"wbeat_k{k}", n_c * OPERAND_BITS)
                mine = kept(f"wbeat_mine_k{k}")
                m.d.sync += [swaps[k].eq(swap_taken),
                             mine.eq(w_take & (wbeat.kernel == k)), beat.eq(masked)]
                with m.If(mine):
                    m.d.sync += kernels[k].as_value().eq(beat)
        else:
            for k in range(n_k):
                with m.If(w_take & (wbeat.kernel == k)):
                    m.d.sync += kernels[k].as_value().eq(masked)

        # Stage 0: the atom with masked lanes zeroed.  Stage 1: a copy of the lanes for
        # each cell (``keep``: not merged into one), each placed between the input register
        # and its multiplier, which sit far apart on an FPGA (not the input register
        # straight into the A inputs of its DSP blocks on one net).
        atom = self.data.payload
        lanes = [Signal(signed(OPERAND_BITS), name=f"lane_{c}") for c in range(n_c)]
        m.d.sync += [lanes[c].eq(Mux(atom.mask[c], atom.data[c], 0)) for c in range(n_c)]
        near = [[kept(f"lane_k{k}_c{c}", signed(OPERAND_BITS))
                 for c in range(n_c)] for k in range(n_k)]
        m.d.sync += [near[k][c].eq(lanes[c]) for k in range(n_k) for c in range(n_c)]

        # Stages 2 and 3: each multiplier's operands and product in registers beside it
        # (on ECP5 the DSP block's own, :func:`registered_multiply`).
        ecp5 = use_ecp5_dsp(self.ecp5_dsp, platform)
        stage = [[Signal(signed(product_bits), name=f"prod_k{k}_c{c}") for c in range(n_c)]
                 for k in range(n_k)]
        for k in range(n_k):
            for c in range(n_c):
                registered_multiply(m, f"mult_k{k}_c{c}", near[k][c], kernels[k][c],
                                    stage[k][c], ecp5, b_enable=swaps[k])

        # Stage 4: the products' copies in fabric registers.  On ECP5 a cell's blocks take
        # DSP sites across the die, far from the adders.
        copies = [[Signal.like(stage[k][c], name=f"prod_copy_k{k}_c{c}") for c in range(n_c)]
                  for k in range(n_k)]
        m.d.sync += [copies[k][c].eq(stage[k][c]) for k in range(n_k) for c in range(n_c)]
        stage = copies

        # Stages 5..L+4: one adder-tree level each, one bit wider per level, so
        # the last level is exactly mac_result_bits wide and cannot overflow.
        for level in range(1, levels + 1):
            width = product_bits + level
            nxt = [[Signal(signed(width), name=f"sum{level}_k{k}_{i}")
                    for i in range(len(stage[k]) // 2)] for k in range(n_k)]
            m.d.sync += [nxt[k][i].eq(stage[k][2 * i] + stage[k][2 * i + 1])
                         for k in range(n_k) for i in range(len(nxt[k]))]
            stage = nxt

        m.d.comb += [results.w_en.eq(valid[last]),
                     results.w_data.eq(Cat(stage[k][0] for k in range(n_k))),
                     self.result.valid.eq(results.r_rdy), results.r_en.eq(self.result.ready),
                     self.result.payload.eq(results.r_data)]
        return m
