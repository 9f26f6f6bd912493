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
until overwritten.  Ordering rule: a data atom accepted in cycle *t* uses the
weights as they were *before* any weight beat of cycle *t* (the weight
registers update at the clock edge that also captures the products), so a
producer may stream the next kernel group in the same cycle as the last atom
of the current one.

Pipeline (latency ``1 + log2(atomic_c)`` cycles when not stalled)::

    data ─┬─ mask ─ x weights[k] ─> products reg ─> adder level 1 reg ─> ... ─> result
          (stage 0: one int8 x int8 product per MAC; stages 1..L: one adder-tree level each)

Every stage has a valid bit and advances when the next stage is empty or
advancing, so bubbles collapse and a stalled ``result`` (ready low) holds the
pipeline without losing or duplicating an atom.  ``data.ready`` therefore
depends combinationally on ``result.ready`` (allowed by the stream rules:
ready may depend on the other side, valid never depends on ready).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig

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

    def __init__(self, cfg: HwConfig) -> None:
        super().__init__({
            "data": data.ArrayLayout(signed(OPERAND_BITS), cfg.atomic_c),
            "mask": unsigned(cfg.atomic_c),
        })


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
        that is always 1 (a plain port rather than ``always_ready=True``,
        whose constant ``ready`` cannot be a Verilog port).
    result : ``Out(stream.Signature(ResultLayout(cfg)))``
        Sums out; ``valid``/``payload`` are outputs, ``ready`` an input.
    """

    def __init__(self, cfg: HwConfig) -> None:
        _check_int8(cfg)
        self.cfg = cfg
        super().__init__({
            "data": In(stream.Signature(DataAtomLayout(cfg))),
            "weight": In(stream.Signature(WeightLayout(cfg))),
            "result": Out(stream.Signature(ResultLayout(cfg))),
        })

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.cfg == self.cfg

    def __hash__(self) -> int:
        return hash((type(self), self.cfg))


def pipeline_depth(cfg: HwConfig) -> int:
    """Register stages between ``data`` and ``result``: products + one per adder level."""
    return 1 + (cfg.atomic_c.bit_length() - 1)


class Cmac(wiring.Component):
    """Pipelined int8 MAC array; see the module docstring for the protocol.

    Parameters
    ----------
    cfg : HwConfig
        ``atomic_c`` (lanes per cell) and ``atomic_k`` (cells) come from here.

    Attributes
    ----------
    data : stream interface, in
        Feature atoms (:class:`DataAtomLayout`).
    weight : stream interface, in (``ready`` is always 1)
        Kernel loads (:class:`WeightLayout`).
    result : stream interface, out
        Cell sums (:class:`ResultLayout`).
    """

    def __init__(self, cfg: HwConfig) -> None:
        self.cfg = cfg
        super().__init__(CmacSignature(cfg))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        n_c, n_k = cfg.atomic_c, cfg.atomic_k
        levels = n_c.bit_length() - 1
        product_bits = 2 * OPERAND_BITS

        # Weight storage: masked weights are stored as 0, so a masked weight
        # lane yields a zero product without a mask in the product path.
        weights = [Signal(data.ArrayLayout(signed(OPERAND_BITS), n_c), name=f"wt_{k}")
                   for k in range(n_k)]
        wbeat = self.weight.payload
        m.d.comb += self.weight.ready.eq(1)
        for k in range(n_k):
            with m.If(self.weight.valid & (wbeat.kernel == k)):
                m.d.sync += [weights[k][c].eq(Mux(wbeat.mask[c], wbeat.data[c], 0))
                             for c in range(n_c)]

        # Stage enables: a stage takes new contents when it is empty or its
        # successor takes its contents (bubble collapsing); the last stage
        # hands over when the consumer is ready.
        valid = [Signal(name=f"stage{s}_valid") for s in range(levels + 1)]
        enable = [Signal(name=f"stage{s}_en") for s in range(levels + 1)]
        m.d.comb += enable[levels].eq(~valid[levels] | self.result.ready)
        for s in range(levels):
            m.d.comb += enable[s].eq(~valid[s] | enable[s + 1])
        m.d.comb += self.data.ready.eq(enable[0])

        # Stage 0: one registered product per MAC (data mask applied here).
        atom = self.data.payload
        lanes = [Mux(atom.mask[c], atom.data[c], 0) for c in range(n_c)]
        stage = [[Signal(signed(product_bits), name=f"prod_k{k}_c{c}") for c in range(n_c)]
                 for k in range(n_k)]
        with m.If(enable[0]):
            m.d.sync += valid[0].eq(self.data.valid)
            m.d.sync += [stage[k][c].eq(lanes[c] * weights[k][c])
                         for k in range(n_k) for c in range(n_c)]

        # Stages 1..L: one adder-tree level each, one bit wider per level, so
        # the last level is exactly mac_result_bits wide and cannot overflow.
        for s in range(1, levels + 1):
            width = product_bits + s
            nxt = [[Signal(signed(width), name=f"sum{s}_k{k}_{i}")
                    for i in range(len(stage[k]) // 2)] for k in range(n_k)]
            with m.If(enable[s]):
                m.d.sync += valid[s].eq(valid[s - 1])
                m.d.sync += [nxt[k][i].eq(stage[k][2 * i] + stage[k][2 * i + 1])
                             for k in range(n_k) for i in range(len(nxt[k]))]
            stage = nxt

        m.d.comb += self.result.valid.eq(valid[levels])
        m.d.comb += [self.result.payload[k].eq(stage[k][0]) for k in range(n_k)]
        return m
