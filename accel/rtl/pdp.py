"""PDP from memory: max, min and average pooling of an int8 cube, on AXI4.

The planar data processor reads its input cube through PDP_RDMA and writes the pooled cube,
atom by atom (``atom`` channels of one point: a memory word).  It computes what the
cmodel's :mod:`accel.cmod.pdp` computes, byte for byte:

* **windows** of 1..8 x 1..8 at strides 1..16, padded on the left and top by the
  ``PAD_LEFT``/``PAD_TOP`` registers and, right and below, wherever a window runs past the
  cube (or past its split-width slice);
* **max / min** over the window's cells inside the cube (a window wholly in the padding
  gives the neutral value saturated: -128 for max, 127 for min);
* **average**: the cells' sum plus the padding's share from ``PAD_VALUE_<n>X`` (each
  real row adds the value for its ``n`` padded columns; the ``m`` padded rows add
  ``PAD_VALUE_<m>X`` times the kernel width), times the 16.16 reciprocal of the width,
  rounded half away from zero, then of the height likewise, saturated to int8.  The
  sum needs 16 bits (64 cells of 128 and two padding terms of at most 8 x 1024), so the
  cmodel's saturation to 32 bits never acts and is not built;
* **split-width mode** (``SPLIT_NUM`` = n - 1): n vertical slices pooled one after the
  other, slice 0 from column 0 with the left padding, slice i > 0 from column
  ``first + (i-1) * mid - (kernel_w - stride_w)`` over ``mid`` (or ``last``) columns plus
  that overlap, each writing its ``PARTIAL_WIDTH_OUT`` columns;
* every lane of an atom alike: the lanes of the last surface past ``C`` are pooled as
  memory holds them, as the cmodel does.

How: it runs as NVIDIA's PDP does, one element a cycle (nv_small's PDP throughput: a
word every ``atom`` cycles), each input element read once, with the windows separated
into their rows and columns:

* the jobs are the slices' surfaces, one after the other; for each, one AXI command per
  input row;
* the **row stage** folds each word into the windows of its row it lies in, one window a
  cycle (at most ceil(kernel_w / stride_w) <= 8 are open), and hands each window's value
  on after its last real column (a window wholly in the padding: the neutral value);
* the **column stage** folds each such value into the output rows its input row belongs
  to, one a cycle, in a line buffer of NVIDIA's size (7 KiB: ``overlap`` output rows of
  :func:`accel.cbuf.pdp_max_width` columns, 14 bits a lane, which the cmodel checks every
  operation against), and at an output row's last real row queues the value for a short
  pipeline that, four lanes a cycle, adds the average's padding, applies the reciprocals and
  saturates before the :class:`~accel.rtl.axi.AxiWriter` writes the atom.  Output rows
  wholly in the padding are written as the first (above) or last (below) input row's
  windows pass.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from accel.cbuf import PDP_BUFFER_BYTES
from accel.config import HwConfig
from accel.rtl.axi import AxiReader, AxiWriter, read_signature, write_signature
from accel.rtl.cmac import DSP_PRODUCT_BITS, registered_multiply, use_ecp5_dsp
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS
from accel.rtl.credits import CountedFIFO, credit_flags, credit_room
from accel.rtl.postproc import saturate
from accel.rtl.timing import (
    PassCount,
    delayed,
    kept_copies,
    registered_copies,
    set_all,
    stage,
)

#: the PDP's units, its read DMA first (enabled together, completed together)
PDP_UNITS = ("NVDLA_PDP_RDMA", "NVDLA_PDP")
#: ``POOLING_METHOD`` values
AVERAGE, MAX, MIN = 0, 1, 2
#: bits of the padding value ``PAD_VALUE_<n>X`` for n = 1..7, as the cmodel reads them
PAD_VALUE_BITS = (8, 9, 10, 10, 11, 11, 11)
#: bits of a window's sum with its padding (see the module docstring)
SUM_BITS = 17
#: bits of a lane of a window pooled across one row (at most 8 int8 values summed)
ROW_BITS = 12
#: bits of a lane in the line buffer (at most 64 int8 values summed), as NVIDIA's 14
BUFFER_BITS = 14
#: windows of a row open at once: at most ceil(kernel_w / stride_w)
OPEN_WINDOWS = 8
#: windows pooled across a row queued between the row and the column stage
HVALS_AHEAD = 8
#: lanes the output pipeline computes a cycle: four, a word every two cycles.  The column
#: stage hands on a window's words every eight cycles (an input word's), one in the steady
#: state but several as the first or last input row passes (the rows that close together
#: and those wholly in the padding above or below); two lanes a cycle made
#: ``pdp_24x16x1_8x8_ave`` (three rows closing at once) 1.084x the estimate, one 1.193x
OUTPUT_LANES = 4
#: the stages of the output pipeline, counted from the column stage's take (a lane's last
#: is the eleventh; see :meth:`Pdp.elaborate`)
PIPELINE_STAGES = 11
#: pooled words queued for the write DMA (the credits: more than the stages hold, so that
#: a word a cycle can flow)
OUT_QUEUE = 16


class PdpConfigLayout(data.StructLayout):
    """One operation's registers as the PDP uses them (sizes as counts, not minus one)."""

    def __init__(self) -> None:
        size = SIZE_BITS
        super().__init__({
            "surfaces": size, "h": size, "w": size, "out_h": size, "out_w": size,
            "method": 2, "kernel_w": 4, "kernel_h": 4, "stride_w": 5, "stride_h": 5,
            "pad_left": 3, "pad_top": 3, "recip_w": 17, "recip_h": 17,
            "pad_values": data.ArrayLayout(signed(12), 8),     # [0, PV1 .. PV7]
            "splits_m1": 8,
            "in_first": 11, "in_mid": 11, "in_last": 11,
            "out_first": 11, "out_mid": 11, "out_last": 11,
            "src": ADDR_BITS, "src_line": ADDR_BITS, "src_surf": ADDR_BITS,
            "dst": ADDR_BITS, "dst_line": ADDR_BITS, "dst_surf": ADDR_BITS,
        })


def config_from_registers(field, hw: HwConfig):
    """A function of a :class:`PdpConfigLayout` signal giving its assignments from the
    consumer groups' registers: ``field(unit, reg, name=None)`` gives a field (or the
    whole register)."""
    pdp, rdma = "NVDLA_PDP", "NVDLA_PDP_RDMA"
    shift = hw.atom_size.bit_length() - 1

    def assign(cfg) -> list:
        out = [
            cfg.surfaces.eq((field(pdp, "D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL") >> shift)
                            + 1),
            cfg.h.eq(field(pdp, "D_DATA_CUBE_IN_HEIGHT", "CUBE_IN_HEIGHT") + 1),
            cfg.w.eq(field(pdp, "D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH") + 1),
            cfg.out_h.eq(field(pdp, "D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT") + 1),
            cfg.out_w.eq(field(pdp, "D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH") + 1),
            cfg.method.eq(field(pdp, "D_OPERATION_MODE_CFG", "POOLING_METHOD")),
            cfg.splits_m1.eq(field(pdp, "D_OPERATION_MODE_CFG", "SPLIT_NUM")),
            cfg.kernel_w.eq(field(pdp, "D_POOLING_KERNEL_CFG", "KERNEL_WIDTH") + 1),
            cfg.kernel_h.eq(field(pdp, "D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT") + 1),
            cfg.stride_w.eq(field(pdp, "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1),
            cfg.stride_h.eq(field(pdp, "D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1),
            cfg.pad_left.eq(field(pdp, "D_POOLING_PADDING_CFG", "PAD_LEFT")),
            cfg.pad_top.eq(field(pdp, "D_POOLING_PADDING_CFG", "PAD_TOP")),
            cfg.recip_w.eq(field(pdp, "D_RECIP_KERNEL_WIDTH")),
            cfg.recip_h.eq(field(pdp, "D_RECIP_KERNEL_HEIGHT")),
            cfg.pad_values[0].eq(0),
            cfg.src.eq(field(rdma, "D_SRC_BASE_ADDR_LOW")),
            cfg.src_line.eq(field(rdma, "D_SRC_LINE_STRIDE")),
            cfg.src_surf.eq(field(rdma, "D_SRC_SURFACE_STRIDE")),
            cfg.dst.eq(field(pdp, "D_DST_BASE_ADDR_LOW")),
            cfg.dst_line.eq(field(pdp, "D_DST_LINE_STRIDE")),
            cfg.dst_surf.eq(field(pdp, "D_DST_SURFACE_STRIDE")),
        ]
        for n, bits in enumerate(PAD_VALUE_BITS, 1):
            raw = field(pdp, f"D_POOLING_PADDING_VALUE_{n}_CFG")
            out.append(cfg.pad_values[n].eq(raw[:bits].as_signed()))
        for part in ("FIRST", "MID", "LAST"):
            out += [getattr(cfg, f"in_{part.lower()}").eq(
                        field(pdp, "D_PARTIAL_WIDTH_IN", f"PARTIAL_WIDTH_IN_{part}") + 1),
                    getattr(cfg, f"out_{part.lower()}").eq(
                        field(pdp, "D_PARTIAL_WIDTH_OUT", f"PARTIAL_WIDTH_OUT_{part}") + 1)]
        return out
    return assign


def _hval_layout(lanes: int) -> data.StructLayout:
    """A window of one input row, pooled across its columns, as the row stage hands it on."""
    return data.StructLayout({"lanes": data.ArrayLayout(signed(ROW_BITS), lanes), "cols": 4})


def _fold_stages(m: Module, name: str, first, held, v, is_max, is_min, bits: int) -> Value:
    """A window's value ``held`` folded with the new value ``v`` (``v`` itself at the
    window's ``first`` value): the larger, the smaller or the sum, by the method's flags.
    The comparisons and the sum go into registers, and the choice among them is made from
    those a cycle later, in the cycle the result is returned: one carry chain per stage
    (the comparison's chain through the choice in one cycle was the row stage's path at 86
    MHz and the column stage's at 88 MHz on an ECP5)."""
    takes_word = stage(m, f"{name}_takes_word",
                       first | (is_max & (v > held)) | (is_min & (v < held)))
    takes_sum = stage(m, f"{name}_takes_sum", ~first & ~is_max & ~is_min)
    word, kept = stage(m, f"{name}_word", v), stage(m, f"{name}_held", held)
    total = stage(m, f"{name}_sum", held + v, signed(bits))
    return Mux(takes_sum, total, Mux(takes_word, word, kept))


def _round16(x):
    """``x >> 16`` rounded half away from zero (:func:`accel.arith.shift_round`)."""
    return (x + (1 << 15) - x[-1]) >> 16


class Pdp(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(PdpConfigLayout())``, held while the operation runs
    start : ``In(1)``, a pulse: the operation starts
    done : ``Out(1)``, a pulse: its last write was answered
    busy : ``Out(1)`` from ``start`` to ``done``, both included
    bus_error : ``Out(1)``, sticky: an AXI response was not OKAY
    axi_read, axi_write : the AXI4 read and write channels
    """

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        super().__init__({
            "cfg": In(PdpConfigLayout()), "start": In(1), "done": Out(1), "busy": Out(1),
            "bus_error": Out(1),
            "axi_read": Out(read_signature(ADDR_BITS, 8 * hw.atom_size)),
            "axi_write": Out(write_signature(ADDR_BITS, 8 * hw.atom_size)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        atom, cfg = self.hw.atom_size, self.cfg
        lanes = atom                    # int8 lanes of a word
        m.submodules.reader = reader = AxiReader(ADDR_BITS, atom)
        m.submodules.writer = writer = AxiWriter(ADDR_BITS, atom)
        wiring.connect(m, wiring.flipped(self.axi_read), reader.axi)
        wiring.connect(m, wiring.flipped(self.axi_write), writer.axi)
        m.d.comb += self.bus_error.eq(reader.bus_error | writer.bus_error)
        # the method as flags in registers (``cfg`` holds from before the start), a copy
        # for each lane of the row stage's fold (kept apart, beside its lane)
        is_max, is_min = stage(m, "is_max", cfg.method == MAX), stage(m, "is_min",
                                                                      cfg.method == MIN)
        neutral = Mux(is_max, -128, Mux(is_min, 127, 0))
        coord = signed(SIZE_BITS + 2)

        # ---- the jobs: each slice's surfaces, one at a time ------------------------------
        slice_left = Signal(8)                 # slices after this one
        in0, in_w, out0, out_w = (Signal(SIZE_BITS, name=n)
                                  for n in ("slice_in0", "slice_in_w", "slice_out0",
                                            "slice_out_w"))
        pad_left = Signal(3)
        next_in0, next_out0 = Signal(coord), Signal(SIZE_BITS)
        surfaces = PassCount(m, "surface", cfg.surfaces, SIZE_BITS)
        # the job's read, row and column stages are done, a register (the three flags into
        # the enables of the next job's registers was the unit's path at 80 MHz)
        job_ended = Signal()
        surf_addr, dsurf_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        job_start = Signal()                   # a pulse: the three stages start a job
        read_done, row_done, col_done = Signal(), Signal(), Signal()
        walking = Signal()
        walked = Signal()                      # every job run
        # the line buffer's rows (a power of two): ``overlap`` output rows of ``DEPTH /
        # overlap`` columns each, as NVIDIA's 7 KiB buffer (:func:`accel.cbuf.pdp_max_width`)
        depth = PDP_BUFFER_BYTES * 8 // (lanes * BUFFER_BITS)
        depth_log2 = depth.bit_length() - 1
        overlap_log2 = Signal(2)
        kh, sh = cfg.kernel_h, cfg.stride_h
        # the next slice's widths and whether it is the last, registers (slice_left into a
        # multiplexer and an adder into in_w was 11.36 ns in the full engine): the slice
        # count moves at a slice's end, at least three cycles before the next end
        next_last = Signal()
        in_last_w, in_mid_w = (Signal(SIZE_BITS, name=f"slice_in_{n}_w") for n in ("last", "mid"))
        m.d.sync += [next_last.eq(slice_left == 1),
                     in_last_w.eq(cfg.in_last + cfg.kernel_w - cfg.stride_w),
                     in_mid_w.eq(cfg.in_mid + cfg.kernel_w - cfg.stride_w)]
        with m.FSM(name="jobs"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [slice_left.eq(cfg.splits_m1), in0.eq(0), out0.eq(0),
                                 pad_left.eq(cfg.pad_left),
                                 in_w.eq(Mux(cfg.splits_m1 == 0, cfg.w, cfg.in_first)),
                                 out_w.eq(Mux(cfg.splits_m1 == 0, cfg.out_w, cfg.out_first)),
                                 next_in0.eq(cfg.in_first - (cfg.kernel_w - cfg.stride_w)),
                                 next_out0.eq(cfg.out_first), walked.eq(0), walking.eq(1),
                                 # ceil(kh / sh) -> the lines it keeps: 1, 1, 2, 4, 4, 8...
                                 overlap_log2.eq(Mux(kh > 4 * sh, 3, Mux(kh > 2 * sh, 2,
                                                                         Mux(kh > sh, 1, 0))))]
                    m.next = "SLICE"
            with m.State("SLICE"):
                surfaces.first(m)
                m.d.sync += [surf_addr.eq(cfg.src), dsurf_addr.eq(cfg.dst)]
                m.next = "START"
            with m.State("START"):
                m.d.comb += job_start.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                m.d.sync += job_ended.eq(read_done & row_done & col_done & ~job_ended)
                with m.If(job_ended):
                    surfaces.next(m)
                    m.d.sync += [surf_addr.eq(surf_addr + cfg.src_surf),
                                 dsurf_addr.eq(dsurf_addr + cfg.dst_surf)]
                    m.next = "START"
                    with m.If(surfaces.last):
                        m.d.sync += [slice_left.eq(slice_left - 1), in0.eq(next_in0),
                                     out0.eq(next_out0), pad_left.eq(0),
                                     in_w.eq(Mux(next_last, in_last_w, in_mid_w)),
                                     out_w.eq(Mux(next_last, cfg.out_last, cfg.out_mid)),
                                     next_in0.eq(next_in0 + cfg.in_mid),
                                     next_out0.eq(next_out0 + cfg.out_mid)]
                        m.next = "SLICE"
                        with m.If(slice_left == 0):
                            m.d.sync += [walking.eq(0), walked.eq(1)]
                            m.next = "IDLE"

        # ---- the read: the job's rows, each one command ---------------------------------
        rows_left = Signal(SIZE_BITS)
        row_addr = Signal(ADDR_BITS)
        m.d.comb += [reader.cmd.payload.addr.eq(row_addr), reader.cmd.payload.beats.eq(in_w),
                     reader.cmd.valid.eq(rows_left != 0)]
        with m.If(job_start):
            m.d.sync += [rows_left.eq(cfg.h), row_addr.eq(surf_addr + in0 * atom),
                         read_done.eq(0)]
        with m.Elif(reader.cmd.valid & reader.cmd.ready):
            m.d.sync += [rows_left.eq(rows_left - 1), row_addr.eq(row_addr + cfg.src_line)]
        with m.Elif(rows_left == 0):
            m.d.sync += read_done.eq(1)

        # ---- the row stage: each word folded into the windows it lies in, in turn --------
        # Window ``ox`` covers the slice's columns [xs, xs + kernel_w), xs = ox * stride_w -
        # pad_left; those inside the slice are real.  The open windows are [lo, hi): a word
        # folds into each (a cycle each, at most ceil(kernel_w / stride_w) <= 8), a window
        # takes its first word as it is and hands its value on after its last real column.
        m.submodules.hvals = hvals = fifo.SyncFIFOBuffered(width=_hval_layout(lanes).size,
                                                           depth=HVALS_AHEAD)
        hval_in = Signal(_hval_layout(lanes))
        m.d.comb += hvals.w_data.eq(stage(m, "hval_data", hval_in.as_value()))
        hacc = [[Signal(signed(ROW_BITS), name=f"hacc{k}_{i}") for i in range(lanes)]
                for k in range(OPEN_WINDOWS)]
        # Each window is tracked by ``d = h_x - xs``, the word's column in it (0 at its
        # first column, kernel_w - 1 at its last; negative before it opens), for window k
        # (the one taking this cycle), lo (the first open) and hi (the next to open); the
        # windows by counts (those open after k, those open, those of the row still to
        # open or to close) and k by its slot.  Every decision is then a few gates of
        # registers: with the columns themselves, ``min(xs + kernel_w, width)`` compared
        # with the word's column was an adder, a comparison and a subtraction into an
        # equality, the unit's path at 43 MHz on an ECP5.
        h_y = Signal(SIZE_BITS)
        d_k, d_lo, d_hi = (Signal(signed(7), name=n) for n in ("d_k", "d_lo", "d_hi"))
        # d_hi - stride_w, window hi's successor's, kept beside d_hi (its subtraction into
        # the decision whether the word has another window was the unit's path at 86 MHz)
        d_hi_next = Signal(signed(8))
        # window lo lies wholly in the left padding (d_lo > kernel_w - 1), kept beside d_lo
        # while the row starts (the comparison into k's next value was the unit's path at
        # 87 MHz)
        lo_padded = Signal()
        k, lo_slot = Signal(3), Signal(3)
        ahead, opened = Signal(4), Signal(4)    # windows open after k; open (hi - lo)
        lo_left, hi_left = Signal(SIZE_BITS), Signal(SIZE_BITS)   # out_w - lo, out_w - hi
        x_small = Signal(4)                     # the word's column, at most 15
        word = Signal(8 * lanes)
        have_word = Signal()
        # the bus's next word, taken whenever this register is free (the decision to take
        # a word into the bus's read enable was the unit's path at 86 MHz)
        next_word, have_next = Signal(8 * lanes), Signal()
        pace = Signal(range(max(atom, 2)))      # cycles until the next word may be taken
        with m.If(pace != 0):
            m.d.sync += pace.eq(pace - 1)
        # the stride from a register of the row stage's own (the operation's register
        # across the die into d_hi_next's subtraction was 11.46 ns in the full engine)
        kw, sw = cfg.kernel_w, Signal.like(cfg.stride_w, name="row_stride_w")
        kw_m1, sw2 = Signal(3), Signal(6)
        m.d.sync += [kw_m1.eq(kw - 1), sw.eq(cfg.stride_w), sw2.eq(2 * cfg.stride_w)]
        # hi_left != 0, hi_left > 1 and lo_left != 0, registers stepped with the counts
        # (the comparisons into the word's take were the unit's path at 102 MHz)
        more_hi, hi_many, more_lo = Signal(), Signal(), Signal()
        # the window taking the cycle: an open one (k < hi) or the next to open
        opening = (ahead == 0) & more_hi & ~d_hi[-1]
        active = (ahead != 0) | opening
        # the row's columns after the word's, and whether it is the last
        cols = PassCount(m, "col", in_w, SIZE_BITS)
        last_col = cols.last
        closes = (d_k == kw_m1) | last_col
        first_col = (d_k == 0) | (x_small == 0)           # the window's first real column
        # a word is taken into ``word`` and folded from the next cycle (the bus's word
        # straight into the fold was the unit's path at 57 MHz)
        taking = Signal()                      # the word is taken this cycle
        m.d.comb += reader.data.ready.eq(~have_next)
        with m.If(reader.data.valid & ~have_next):
            m.d.sync += [next_word.eq(reader.data.payload), have_next.eq(1)]
        with m.If(taking):
            m.d.sync += have_next.eq(0)
        # The window k of the cycle is decided, then folded in the two cycles after it
        # (stages f and g): the word's lanes, the window's slot (a copy per lane), whether
        # it is its first column and what it hands on, in registers.  Every value handed
        # on (a closing window's or the padding's neutral) passes stages f and g, in
        # order, on a credit of the hand-off FIFO taken at the decision.
        # (The window's select, the comparison and the sum after the decision's logic were
        # the unit's path at 62 MHz.)
        k_next = Signal(3)
        m.d.comb += k_next.eq(k)
        m.d.sync += k.eq(k_next)
        process, push_close, push_pad = Signal(), Signal(), Signal()
        # (a credit comes back a cycle after its window leaves the FIFO: the column stage's
        # read, from its output credits through its stall, ended in this count at 90 MHz)
        push_room = credit_room(m, HVALS_AHEAD, push_close | push_pad, hvals.r_en,
                                "hval_credits", late_give=True)
        f_fold, f_push, f_pad = Signal(), Signal(), Signal()
        f_cols = Signal(4)
        close_cols = Signal(4)
        f_word = stage(m, "f_word", word)
        f_first = stage(m, "f_first", first_col)
        f_slot = registered_copies(m, "f_slot", k, lanes)
        # the window's value is read at the decision (a copy of k per lane): it was last
        # written at least eight cycles before, a word ago (a word a PDP cycle per lane)
        lane_k = kept_copies("lane_k", lanes, 3)
        m.d.sync += set_all(lane_k, k_next)
        lane_max = registered_copies(m, "lane_max", is_max, lanes)
        lane_min = registered_copies(m, "lane_min", is_min, lanes)
        m.d.comb += close_cols.eq(Mux(x_small < d_k, x_small, d_k) + 1)
        m.d.sync += [f_fold.eq(process), f_push.eq(push_close | push_pad), f_pad.eq(push_pad),
                     f_cols.eq(Mux(push_pad, 0, close_cols))]
        # The fold takes two stages (:func:`_fold_stages`): stage f compares the word with
        # the window's value and sums them, stage g chooses and writes the window back.
        # The window is read again at the next word's decision, ``atom`` cycles later:
        # after its write.
        assert atom >= 3, "a window is read again before its fold is written back"
        g_fold, g_push, g_pad = (stage(m, f"g_{n}", v) for n, v in
                                 (("fold", f_fold), ("push", f_push), ("pad", f_pad)))
        g_cols = stage(m, "g_cols", f_cols)
        g_slot = [stage(m, f"g_slot_{i}", f_slot[i]) for i in range(lanes)]
        folded = [Signal(signed(ROW_BITS), name=f"folded{i}") for i in range(lanes)]
        for i in range(lanes):
            held = stage(m, f"f_held{i}", Array(h[i] for h in hacc)[lane_k[i]])
            m.d.comb += folded[i].eq(_fold_stages(m, f"g{i}", f_first, held,
                                                  f_word[8 * i:8 * i + 8].as_signed(),
                                                  lane_max[i], lane_min[i], ROW_BITS))
            with m.If(g_fold):
                for j in range(OPEN_WINDOWS):
                    with m.If(g_slot[i] == j):
                        m.d.sync += hacc[j][i].eq(folded[i])
        # (each value handed on a cycle later, from registers: the fold into the FIFO's
        # storage was the unit's path at 78 MHz)
        m.d.comb += [hvals.w_en.eq(stage(m, "hval_push", g_push)), hval_in.cols.eq(g_cols)]
        m.d.comb += [hval_in.lanes[i].eq(Mux(g_pad, neutral, folded[i])) for i in range(lanes)]
        with m.FSM(name="rows"):
            with m.State("IDLE"):
                with m.If(job_start):
                    m.d.sync += [h_y.eq(0), row_done.eq(0)]
                    m.next = "ROW"
            with m.State("ROW"):
                m.d.comb += k_next.eq(0)
                cols.first(m)
                m.d.sync += [x_small.eq(0),
                             lo_slot.eq(0), ahead.eq(0), opened.eq(0),
                             lo_left.eq(out_w), hi_left.eq(out_w), more_lo.eq(1),
                             more_hi.eq(1), hi_many.eq(out_w > 1),
                             d_k.eq(pad_left), d_lo.eq(pad_left), d_hi.eq(pad_left),
                             d_hi_next.eq(pad_left - sw), lo_padded.eq(pad_left > kw_m1)]
                m.next = "LEFT"
            with m.State("LEFT"):              # windows wholly in the left padding
                with m.If(more_lo & lo_padded):
                    with m.If(push_room):      # lo, hi and k the window after lo
                        m.d.comb += [push_pad.eq(1), k_next.eq(lo_slot + 1)]
                        m.d.sync += [lo_slot.eq(lo_slot + 1),
                                     lo_left.eq(lo_left - 1), hi_left.eq(lo_left - 1),
                                     more_lo.eq(lo_left != 1), more_hi.eq(lo_left != 1),
                                     hi_many.eq(lo_left > 2),
                                     d_lo.eq(d_lo - sw), d_hi.eq(d_lo - sw),
                                     d_hi_next.eq(d_lo - sw2), d_k.eq(d_lo - sw),
                                     lo_padded.eq(d_lo - sw > kw_m1)]
                with m.Else():
                    m.next = "WORDS"
            with m.State("WORDS"):
                # after this cycle's window: another for this word (one open after k, or
                # the next to open if it starts at or before the word's column)
                next_active = (ahead > 1) | (((ahead == 1) | opening) & Mux(
                    opening, hi_many & ~d_hi_next[-1], more_hi & ~d_hi[-1]))
                blocked = active & closes & ~push_room
                closing = active & closes
                # the next word is taken as the word's last window is folded (not after
                # the row's last column), so that eight windows a word take eight cycles
                word_end = have_word & ~blocked & (~active | ~next_active)
                m.d.comb += taking.eq((~have_word | (word_end & ~last_col)) & (pace == 0)
                                      & have_next)
                with m.If(have_word & ~blocked):
                    with m.If(active):
                        m.d.comb += [process.eq(1), k_next.eq(k + 1)]
                        m.d.sync += [d_k.eq(d_k - sw),
                                     ahead.eq(Mux(opening, 0, ahead - 1)),
                                     opened.eq(opened + opening - closes)]
                        with m.If(opening):
                            m.d.sync += [hi_left.eq(hi_left - 1), more_hi.eq(hi_left != 1),
                                         hi_many.eq(hi_left > 2), d_hi.eq(d_hi_next),
                                         d_hi_next.eq(d_hi_next - sw)]
                        with m.If(closes):
                            m.d.comb += push_close.eq(1)
                            m.d.sync += [lo_slot.eq(k + 1), d_lo.eq(d_k - sw),
                                         lo_left.eq(lo_left - 1), more_lo.eq(lo_left != 1)]
                    with m.If(~active | ~next_active):     # the word's last window
                        # k goes back to the first open window; every window's column
                        # moves on by one
                        m.d.comb += k_next.eq(Mux(closing, k + 1, lo_slot))
                        cols.next(m)
                        m.d.sync += [have_word.eq(0),
                                     x_small.eq(x_small + (x_small != 15)),
                                     d_k.eq(Mux(closing, d_k - sw, d_lo) + 1),
                                     d_lo.eq(Mux(closing, d_k - sw, d_lo) + 1),
                                     d_hi.eq(Mux(opening, d_hi_next, d_hi) + 1),
                                     d_hi_next.eq(Mux(opening, d_hi_next - sw, d_hi_next) + 1),
                                     ahead.eq(opened + opening - closing)]
                        with m.If(last_col):
                            m.next = "RIGHT"
                with m.If(taking):
                    m.d.sync += [word.eq(next_word), have_word.eq(1), pace.eq(atom - 1)]
            with m.State("RIGHT"):             # windows wholly in the right padding
                with m.If(more_lo):
                    with m.If(push_room):
                        m.d.comb += push_pad.eq(1)
                        m.d.sync += [lo_left.eq(lo_left - 1), more_lo.eq(lo_left != 1)]
                with m.Else():
                    m.d.sync += h_y.eq(h_y + 1)
                    m.next = "ROW"
                    with m.If(h_y + 1 == cfg.h):
                        m.d.sync += row_done.eq(1)
                        m.next = "IDLE"

        # ---- the column stage: each row's windows into the output rows they belong to ---
        # Output row ``oy`` covers the rows [ys, ys + kernel_h), ys = oy * stride_h -
        # pad_top.  The open rows are [oy_lo, oy_hi): each keeps a line of the buffer (row
        # ``oy`` mod ``overlap``), where the value of each of its columns builds up; at its
        # last real row a value goes to the pipeline instead.  A step is one output row of
        # one window, a cycle each: the buffer is read as the step is taken and written (or
        # the value handed on) a cycle later.  Rows wholly in the padding take the value
        # of no row: those above as the first row's windows pass, those below as the last
        # row's.
        mem = Memory(shape=unsigned(lanes * BUFFER_BITS), depth=depth, init=[])
        m.submodules.line_buffer = mem
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=(wr,))
        hval = data.View(_hval_layout(lanes), hvals.r_data)
        # As in the row stage, each output row is tracked by ``e = v_y - ys``, the input
        # row's place in it (0 at its first row, kernel_h - 1 at its last, negative before
        # it opens), for the step's row j, the first open row lo and the next to open hi;
        # the rows by counts and j by its slot: each step's flags are a few gates of
        # registers, not ``min(ys + kernel_h, height)`` and its comparisons.
        e_j, e_lo, e_hi = (Signal(signed(7), name=n) for n in ("e_j", "e_lo", "e_hi"))
        j, lo_row = Signal(3), Signal(3)        # the step's row and the first open, mod 8
        rows_open, j_left = Signal(4), Signal(4)          # oy_hi - oy_lo, oy_hi - j
        hi_rows_left = Signal(SIZE_BITS)                  # out_h - oy_hi
        first_row, y_small = Signal(), Signal(4)          # v_y == 0, min(v_y, 15)
        # flags of the counts and offsets above, registers stepped with them (the
        # comparisons into the step's decision were the unit's path at 89 MHz)
        rows = PassCount(m, "row", cfg.h, SIZE_BITS)     # rows after this one, the last
        windows = PassCount(m, "window", out_w, SIZE_BITS)    # the row's windows, the last
        last_row, last_window = rows.last, windows.last
        more_rows_hi = Signal()                           # hi_rows_left != 0
        lo_closed = Signal()                              # e_lo > kernel_h - 1
        kh_m1 = Signal(3)
        # (``e_lo - sh > kh_m1`` as ``e_lo > kh_m1 + sh``: the subtraction into the comparison,
        # two carry chains, was the unit's path at 98 MHz)
        kh_m1_sh = Signal(5)
        m.d.sync += [kh_m1.eq(kh - 1), kh_m1_sh.eq(kh - 1 + sh)]
        out_lo, out_j = Signal(ADDR_BITS), Signal(ADDR_BITS)   # output row addresses, column 0
        col_addr = Signal(ADDR_BITS)                            # the window's column in them
        # A step is read (issued, stage c), its line arrives and is registered (stage b),
        # then folded and handed on, and written back a cycle later: the block RAM's output
        # straight into a register (its output through the fold back into it was the
        # unit's path at 49 MHz).  A line is read again at the earliest three cycles after
        # (the window's end and the ROW state come between), in the cycle of its write.
        c_valid, c_first, c_last, c_empty = Signal(), Signal(), Signal(), Signal()
        c_addr, c_out = Signal(depth_log2), Signal(ADDR_BITS)
        c_rows, c_cols = Signal(4), Signal(4)
        c_hval = [Signal(signed(ROW_BITS), name=f"c_hval{i}") for i in range(lanes)]
        b_valid, b_first, b_last, b_empty = Signal(), Signal(), Signal(), Signal()
        b_addr, b_out = Signal(depth_log2), Signal(ADDR_BITS)
        b_rows, b_cols = Signal(4), Signal(4)
        b_hval = [Signal(signed(ROW_BITS), name=f"b_hval{i}") for i in range(lanes)]
        b_held = Signal(lanes * BUFFER_BITS)
        stall = Signal()                        # a pooled value waits for a queue entry
        # the fold's second stage (a): the column's value, from registers, written back
        # into the line buffer in that cycle (as its block RAM's input)
        a_empty = stage(m, "a_empty", b_empty)
        column = [Signal(signed(BUFFER_BITS), name=f"column{i}") for i in range(lanes)]
        for i in range(lanes):
            held = b_held[BUFFER_BITS * i:BUFFER_BITS * (i + 1)].as_signed()
            m.d.comb += column[i].eq(Mux(a_empty, neutral,
                                         _fold_stages(m, f"a{i}", b_first, held, b_hval[i],
                                                      is_max, is_min, BUFFER_BITS)))
        line = Signal(depth_log2)               # the buffer word of row j, window v_x
        slot_mask, slot_shift = Signal(3), Signal(range(depth_log2 + 1))
        v_x = Signal(SIZE_BITS)                 # the window (a column of the buffer)
        m.d.comb += [slot_mask.eq(Array([0, 1, 3, 7])[overlap_log2]),
                     slot_shift.eq(depth_log2 - overlap_log2),
                     line.eq(((j & slot_mask) << slot_shift) | v_x)]
        # the write in stage a, its address and enable from registers and its data the
        # fold's choice among registers (the whole fold into the block RAM's inputs was the
        # unit's path at 80 MHz): a line read three cycles after its last read gets this
        # write through the read port's transparency
        m.d.comb += [wr.addr.eq(stage(m, "line_write_addr", b_addr)),
                     wr.en.eq(stage(m, "line_write_en", b_valid & ~b_last & ~b_empty)),
                     wr.data.eq(Cat(*(v.as_unsigned() for v in column))),
                     rd.addr.eq(line), rd.en.eq(~stall)]
        with m.If(~stall):
            m.d.sync += [c_valid.eq(0), b_valid.eq(c_valid), b_first.eq(c_first),
                         b_last.eq(c_last), b_empty.eq(c_empty), b_addr.eq(c_addr),
                         b_out.eq(c_out), b_rows.eq(c_rows), b_cols.eq(c_cols),
                         b_held.eq(rd.data)]
            m.d.sync += [b_hval[i].eq(c_hval[i]) for i in range(lanes)]
        with m.FSM(name="columns") as columns:
            with m.State("IDLE"):
                with m.If(job_start):
                    rows.first(m)
                    m.d.sync += [first_row.eq(1), y_small.eq(0), lo_row.eq(0), rows_open.eq(0),
                                 hi_rows_left.eq(cfg.out_h), more_rows_hi.eq(1),
                                 e_lo.eq(cfg.pad_top), lo_closed.eq(cfg.pad_top > kh_m1),
                                 e_hi.eq(cfg.pad_top),
                                 out_lo.eq(dsurf_addr + out0 * atom), col_done.eq(0)]
                    m.next = "ROW"
            with m.State("ROW"):               # the output rows open during this row
                with m.If(~first_row & (rows_open != 0) & lo_closed):
                    m.d.sync += [lo_row.eq(lo_row + 1), rows_open.eq(rows_open - 1),
                                 e_lo.eq(e_lo - sh), lo_closed.eq(e_lo > kh_m1_sh),
                                 out_lo.eq(out_lo + cfg.dst_line)]
                with m.Elif(more_rows_hi & (last_row | ~e_hi[-1])):
                    m.d.sync += [rows_open.eq(rows_open + 1),
                                 hi_rows_left.eq(hi_rows_left - 1),
                                 more_rows_hi.eq(hi_rows_left != 1), e_hi.eq(e_hi - sh)]
                with m.Else():
                    windows.first(m)
                    m.d.sync += [v_x.eq(0), col_addr.eq(0),
                                 j.eq(lo_row), j_left.eq(rows_open), e_j.eq(e_lo),
                                 out_j.eq(out_lo)]
                    m.next = "STEPS"
            with m.State("STEPS"):
                with m.If(~stall):
                    with m.If(hvals.r_rdy & (j_left != 0)):   # the window's step for row j
                        # (rows wholly in the padding: below the first row's start or
                        # past the last row's end)
                        empty = (e_j > kh_m1) | e_j[-1]
                        m.d.sync += [
                            c_valid.eq(1), c_empty.eq(empty),
                            c_first.eq((e_j == 0) | first_row),
                            c_last.eq((e_j == kh_m1) | last_row), c_addr.eq(line),
                            c_out.eq(out_j + col_addr),
                            c_rows.eq(Mux(empty, 0, Mux(y_small < e_j, y_small, e_j) + 1)),
                            c_cols.eq(hval.cols),
                            j.eq(j + 1), j_left.eq(j_left - 1), e_j.eq(e_j - sh),
                            out_j.eq(out_j + cfg.dst_line)]
                        m.d.sync += [c_hval[i].eq(hval.lanes[i]) for i in range(lanes)]
                    with m.Elif(hvals.r_rdy):      # the window is done: the next one
                        # (its value leaves the hand-off FIFO: ``hvals.r_en`` below)
                        windows.next(m)
                        m.d.sync += [v_x.eq(v_x + 1),
                                     col_addr.eq(col_addr + atom), j.eq(lo_row),
                                     j_left.eq(rows_open), e_j.eq(e_lo), out_j.eq(out_lo)]
                        with m.If(last_window):   # the row's last window: the next row
                            rows.next(m)
                            m.d.sync += [first_row.eq(0),
                                         y_small.eq(y_small + (y_small != 15)),
                                         e_lo.eq(e_lo + 1), lo_closed.eq(e_lo >= kh_m1),
                                         e_hi.eq(e_hi + 1)]
                            m.next = "ROW"
                            with m.If(last_row):
                                m.next = "DRAIN"
            with m.State("DRAIN"):
                with m.If(~c_valid & ~b_valid):
                    m.d.sync += col_done.eq(1)
                    m.next = "IDLE"

        # ---- the pipeline: padding, the reciprocals, saturation, lanes in turn -----------
        # A pooled word leaves the column stage only while the output queue has an entry
        # that no word on its way holds (credits), so the stages move every cycle.  Stages
        # from the take: 1 the padding's values, 2 its two products, 3 their sum, the word
        # (the fold's stage a, two stages later) and its padding term queued; then its
        # lanes go down a pipeline :data:`OUTPUT_LANES` at a time (the column stage takes a
        # word every ``atom`` cycles in the steady state, and the queue evens out the
        # bursts of rows closing in the bottom padding): 4 added (average), 6 the width's
        # reciprocal (DSP blocks), 7 rounded, 9 the height's, 10 rounded, 11 saturated;
        # gathered into a word and queued for the write DMA.  Max and min take the same
        # stages, their value unchanged.
        ecp5 = use_ecp5_dsp(None, platform)
        m.submodules.results = results = fifo.SyncFIFOBuffered(
            width=ADDR_BITS + 8 * lanes, depth=OUT_QUEUE)
        final = b_valid & (b_last | b_empty)
        take = Signal()
        # the flag in two copies: the stages' stall, and the hand-off FIFO's read of the
        # column stage's next window (the one flag through the stall into that FIFO's
        # storage was 11.91 ns in the full engine)
        room, room_read = credit_flags(m, OUT_QUEUE, take, results.r_en, "pdp_credits",
                                       copies=2)
        m.d.comb += [take.eq(final & room), stall.eq(final & ~room),
                     hvals.r_en.eq(columns.ongoing("STEPS") & ~(final & ~room_read)
                                   & hvals.r_rdy & (j_left == 0))]
        # words taken and not yet handed to the write DMA (for the completion)
        outstanding = Signal(range(OUT_QUEUE + 1))
        m.d.sync += outstanding.eq(outstanding + take - results.r_en)
        average = stage(m, "average", cfg.method == AVERAGE)
        pv = cfg.pad_values
        rows1 = stage(m, "s1_rows", b_rows)
        pad_cols = stage(m, "s1_pad_col_value", pv[(cfg.kernel_w - b_cols)[:3]])
        pad_rows = stage(m, "s1_pad_row_value", pv[(cfg.kernel_h - b_rows)[:3]])
        pad_term = stage(m, "s3_pad_term", stage(m, "s2_pad_cols", rows1 * pad_cols)
                        + stage(m, "s2_pad_rows", cfg.kernel_w * pad_rows), signed(SUM_BITS))
        pooled = data.StructLayout({"lanes": data.ArrayLayout(signed(BUFFER_BITS), lanes),
                                    "pad": signed(SUM_BITS), "addr": ADDR_BITS})
        # (no checks of its own: the credits keep it from filling, ``queued`` counts it;
        # a FIFO's own level into its storage's write enables was the unit's path at 84 MHz)
        m.submodules.pooled = words = CountedFIFO(width=pooled.size, depth=OUT_QUEUE)
        word_in = Signal(pooled)
        m.d.comb += [word_in.lanes[i].eq(delayed(m, f"s3_column{i}", column[i], 2))
                     for i in range(lanes)]
        queue_in = delayed(m, "s3_valid", take, 3)
        m.d.comb += [word_in.pad.eq(pad_term), word_in.addr.eq(delayed(m, "s3_addr", b_out, 3)),
                     words.w_data.eq(word_in), words.w_en.eq(queue_in)]
        queued = Signal(range(OUT_QUEUE + 1))   # words in the queue
        waiting = Signal()                      # queued != 0, a register stepped with it
        queued_next = Signal.like(queued)
        m.d.comb += queued_next.eq(queued + queue_in - words.r_en)
        m.d.sync += [queued.eq(queued_next), waiting.eq(queued_next != 0)]
        # the serializer: the word's lanes shift out, OUTPUT_LANES a cycle from lane 0; the
        # next word is taken with its last lanes
        per, groups = OUTPUT_LANES, lanes // OUTPUT_LANES
        word = data.View(pooled, words.r_data)
        shifting = Signal(pooled)
        left = Signal(range(groups + 1))        # lane groups of ``shifting`` still to go
        m.d.comb += words.r_en.eq((left <= 1) & waiting)
        with m.If(words.r_en):
            m.d.sync += [shifting.eq(word), left.eq(groups)]
        with m.Elif(left != 0):
            m.d.sync += [left.eq(left - 1)]
            m.d.sync += [shifting.lanes[i].eq(shifting.lanes[i + per])
                         for i in range(lanes - per)]
        lane_valid = stage(m, "s4_valid", left != 0)
        lane_last = stage(m, "s4_last", left == 1)
        lane_addr = stage(m, "s4_addr", shifting.addr)
        out_lanes = []
        for i in range(per):
            v = shifting.lanes[i]
            s4 = stage(m, f"s4_{i}", Mux(average, v + shifting.pad, v), signed(SUM_BITS))
            # the reciprocals: 16.16 of at most 2.0, so each result stays within 18 bits
            by_w = Signal(signed(DSP_PRODUCT_BITS), name=f"by_w{i}")
            registered_multiply(m, f"recip_w_mul{i}", s4, cfg.recip_w, by_w, ecp5)
            s7 = stage(m, f"s7_{i}", Mux(average, _round16(by_w[:35].as_signed()),
                                        delayed(m, f"s6_{i}", s4, 2)), signed(18))
            by_h = Signal(signed(DSP_PRODUCT_BITS), name=f"by_h{i}")
            registered_multiply(m, f"recip_h_mul{i}", s7, cfg.recip_h, by_h, ecp5)
            s10 = stage(m, f"s10_{i}", Mux(average, _round16(by_h[:35].as_signed()),
                                          delayed(m, f"s9_{i}", s7, 2)), signed(18))
            out_lanes.append(stage(m, f"s11_{i}", saturate(s10, 8), signed(8)).as_unsigned())
        after = PIPELINE_STAGES - 4             # stages from s4 to s11
        valid11 = delayed(m, "s11_valid", lane_valid, after)
        last11 = delayed(m, "s11_last", lane_last, after)
        addr11 = delayed(m, "s11_addr", lane_addr, after)
        # the gatherer: lane groups shift in from the top, so that lane 0 ends in the low
        # byte
        gathered = Signal(8 * lanes)
        with m.If(valid11):
            m.d.sync += gathered.eq(Cat(gathered[8 * per:], *out_lanes))
        m.d.comb += [results.w_en.eq(stage(m, "s12_valid", valid11 & last11)),
                     results.w_data.eq(Cat(gathered, stage(m, "s12_addr", addr11))),
                     writer.req.valid.eq(results.r_rdy),
                     writer.req.payload.data.eq(results.r_data[:8 * lanes]),
                     writer.req.payload.addr.eq(results.r_data[8 * lanes:]),
                     writer.req.payload.strb.eq((1 << atom) - 1),
                     results.r_en.eq(writer.req.valid & writer.req.ready)]

        # ---- completion: every job run, every value written and answered ---------------
        settled = Signal()
        m.d.comb += settled.eq(walked & (outstanding == 0) & ~reader.busy & writer.idle)
        m.d.sync += self.done.eq(0)
        with m.If(settled & ~self.done):
            m.d.sync += [walked.eq(0), self.done.eq(1)]
        # (through the cycle of ``done``, while the units' enables are still set)
        m.d.comb += self.busy.eq(walking | walked | self.done)
        return m
