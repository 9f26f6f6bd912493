"""CSC, the convolution sequence controller: the sequence generator, the weight loader
and the data loader, and the round counts by which the two loaders wait for each other.

The loaders read the feature and weight memories (NVDLA's CBUF holds the same atoms):

* feature atom ``(cg, y, x)`` (``atomic_c`` channels of group ``cg``) at
  ``(cg * H + y) * W + x``, or with ``rows_first`` at ``(y * CG + cg) * W + x``: the
  order the CDMA fetches the input in (:func:`accel.rtl.dma.rows_first`), so that it fills
  the memory in address order;
* weight entry of kernel ``kg * atomic_k + k``, channel group ``cg``, tap
  ``(r, s)`` at ``(((kg * CG + cg) * R + r) * S + s) * atomic_k + k``; channels
  past ``C`` hold zeros, the entries of kernels past ``K`` are never read.

For every kernel group, the output points are taken in raster order in stripes of at
most ``points`` (the CACC's entries), balanced (:func:`accel.rtl.conv_layout.stripe_points`).
For every (channel group, kernel tap) of a stripe - a *round* - the weight loader
(:mod:`accel.rtl.csc_weights`) loads the group's ``atomic_k`` kernels into the MAC
array's shadow bank, and the data loader (:mod:`accel.rtl.csc_data`) sends one feature
atom per point.  The round's first atom swaps the banks, in the cycle after its last
kernel entered at the earliest; the next round's kernels enter from that same cycle on,
so a round costs ``max(kernels, points)`` cycles.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.cmac import DataAtomLayout, WeightLayout
from accel.rtl.conv_layout import SIZE_BITS, ConvConfigLayout
from accel.rtl.csc_data import DataLoader
from accel.rtl.csc_sequence import SequenceGenerator
from accel.rtl.csc_weights import WeightLoader


class Csc(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(ConvConfigLayout())``, constant from ``start`` until the last output
    start : ``In(1)``, a one-cycle pulse; ``busy`` : ``Out(1)`` until every atom is sent
    feature_level, weight_level : ``In``: entries of the feature / weight memory written
    so far; a loader reads an entry only below its level
    data, weight : ``Out``: the streams into the MAC array (:class:`accel.rtl.cmac.Cmac`);
    point, first, last : ``Out``: the output point of the atom on ``data``, and whether
    its round is the point's first / last
    points_m1, points_m2 : ``Out``: the operation's output points less one / two, valid
    from the cycle ``counted`` is high (in the start-up, before the first sum)
    """

    def __init__(self, hw: HwConfig, feature_read, weight_read, points: int,
                 feature_entries: int, weight_entries: int, ecp5_dsp: bool | None) -> None:
        self.hw, self.points, self.ecp5_dsp = hw, points, ecp5_dsp
        self.feature_read, self.weight_read = feature_read, weight_read
        self.feature_entries, self.weight_entries = feature_entries, weight_entries
        super().__init__({
            "cfg": In(ConvConfigLayout()),
            "start": In(1), "busy": Out(1),
            "feature_level": In(range(feature_entries + 1)),
            "weight_level": In(range(weight_entries + 1)),
            "data": Out(stream.Signature(DataAtomLayout(hw, shadow=True))),
            "weight": Out(stream.Signature(WeightLayout(hw))),
            "point": Out(range(points)), "first": Out(1), "last": Out(1),
            "points_m1": Out(2 * SIZE_BITS), "points_m2": Out(2 * SIZE_BITS),
            "counted": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        seq = SequenceGenerator(self.hw, self.cfg, self.points, self.feature_entries,
                                self.ecp5_dsp)
        m.submodules.sequence = seq
        m.submodules.weights = weights = WeightLoader(self.hw, seq, self.weight_read,
                                                      self.weight_entries)
        m.submodules.features = features = DataLoader(self.hw, self.cfg, seq,
                                                      self.feature_read, self.points,
                                                      self.feature_entries)
        m.d.comb += [seq.start.eq(self.start), seq.running.eq(features.running),
                     weights.weight_level.eq(self.weight_level),
                     features.feature_level.eq(self.feature_level)]

        # The loaders wait for each other by round.  Their differences stay small, so
        # small counters hold them instead of round numbers to compare:
        # the weight loader: rounds it may still read ahead (2 + rounds started - read)
        load_room = Signal(range(3))
        # the data loader: rounds it may still send (1 + rounds loaded - rounds sent)
        send_room = Signal(range(4))
        # a swap: rounds loaded - rounds started (a swap waits until its round is loaded)
        loaded_ahead = Signal(range(3))
        m.d.sync += [load_room.eq(load_room - weights.round_read + features.started),
                     send_room.eq(send_room + weights.loaded - features.round_sent),
                     loaded_ahead.eq(loaded_ahead + weights.loaded - features.started)]
        with m.If(seq.begin_load):
            m.d.sync += [load_room.eq(2), loaded_ahead.eq(0)]
        with m.If(seq.begin_send):
            m.d.sync += send_room.eq(1)
        m.d.comb += [weights.may_read.eq(load_room != 0),
                     weights.swap_now.eq(features.swap_now),
                     weights.started.eq(features.started),
                     features.may_send.eq(send_room != 0),
                     features.swap_ready.eq(loaded_ahead != 0)]

        wiring.connect(m, weights.weight, wiring.flipped(self.weight))
        wiring.connect(m, features.data, wiring.flipped(self.data))
        m.d.comb += [self.point.eq(features.point), self.first.eq(features.first),
                     self.last.eq(features.last),
                     self.points_m1.eq(seq.total_bound.last),
                     self.points_m2.eq(seq.total_bound.before),
                     self.counted.eq(seq.prep == 1),
                     self.busy.eq((seq.prep != 0) | features.busy | weights.busy)]
        return m
