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

How: a window walker visits the windows (slice, surface, output row, output column),
clips each to the cube, queues its description (rows and columns read, padded rows and
columns, output address) and reads each of its rows as one command of the
:class:`~accel.rtl.axi.AxiReader`.  The reducer folds the words as they come back, then a
short pipeline applies the average's padding and reciprocals and hands the atom to the
:class:`~accel.rtl.axi.AxiWriter`.  Windows that overlap read their shared cells again (no
line buffer): a 3x3 window at stride 1 reads each cell nine times.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.axi import AxiReader, AxiWriter, read_signature, write_signature
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS

#: the PDP's units, its read DMA first (enabled together, completed together)
PDP_UNITS = ("NVDLA_PDP_RDMA", "NVDLA_PDP")
#: ``POOLING_METHOD`` values
AVERAGE, MAX, MIN = 0, 1, 2
#: bits of the padding value ``PAD_VALUE_<n>X`` for n = 1..7, as the cmodel reads them
PAD_VALUE_BITS = (8, 9, 10, 10, 11, 11, 11)
#: bits of a window's sum with its padding (see the module docstring)
SUM_BITS = 17
#: window descriptions queued between the walker and the reducer
WINDOWS_AHEAD = 8


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


def _window_layout() -> data.StructLayout:
    """A window as the walker hands it to the reducer."""
    return data.StructLayout({"rows": 4, "cols": 4, "pad_rows": 4, "pad_cols": 4,
                              "out": ADDR_BITS})


def _round16(m: Module, x, name: str) -> Signal:
    """``x >> 16`` rounded half away from zero (:func:`accel.arith.shift_round`)."""
    out = Signal(signed(len(x) - 15), name=name)
    m.d.comb += out.eq((x + (1 << 15) - x[-1]) >> 16)
    return out


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
        layout = _window_layout()
        m.submodules.windows = windows = fifo.SyncFIFOBuffered(width=layout.size,
                                                               depth=WINDOWS_AHEAD)

        # ---- the walker: slice, surface, output row, output column ----------------------
        coord = signed(SIZE_BITS + 2)
        slice_left = Signal(8)                 # slices after this one
        in0, in_w, out0, out_w = (Signal(SIZE_BITS, name=n)
                                  for n in ("slice_in0", "slice_in_w", "slice_out0",
                                            "slice_out_w"))
        pad_left = Signal(3)
        next_in0, next_out0 = Signal(coord), Signal(SIZE_BITS)
        surface, oy, ox = Signal(SIZE_BITS), Signal(SIZE_BITS), Signal(SIZE_BITS)
        ys, xs = Signal(coord), Signal(coord)  # the window's first row and column
        surf_addr, dsurf_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        row_base, out_row = Signal(ADDR_BITS), Signal(ADDR_BITS)   # at (ys, column 0 - pl)
        win_addr, out_addr = Signal(ADDR_BITS), Signal(ADDR_BITS)
        line_step = Signal(ADDR_BITS)          # stride_h source lines
        top_back = Signal(ADDR_BITS)           # pad_top source lines
        # the window clipped to the cube (or slice): a register stage
        y_end, x_end = Signal(coord), Signal(coord)
        m.d.comb += [y_end.eq(ys + cfg.kernel_h), x_end.eq(xs + cfg.kernel_w)]
        row0 = Mux(ys[-1], 0, ys)
        col0 = Mux(xs[-1], 0, xs)
        row_stop = Mux(y_end > cfg.h, cfg.h, y_end)
        col_stop = Mux(x_end > in_w, in_w, x_end)
        rows = Signal(5)
        cols = Signal(5)
        m.d.comb += [rows.eq(Mux(row_stop > row0, row_stop - row0, 0)),
                     cols.eq(Mux(col_stop > col0, col_stop - col0, 0))]
        clip_top, clip_left = Signal(3), Signal(3)
        m.d.comb += [clip_top.eq(Mux(ys[-1], -ys, 0)), clip_left.eq(Mux(xs[-1], -xs, 0))]
        first = Signal(ADDR_BITS)
        m.d.comb += first.eq(win_addr + clip_top * cfg.src_line + clip_left * atom)
        cmd_addr = Signal(ADDR_BITS)
        cmd_rows = Signal(5)                   # commands (window rows) left to issue
        cmd_beats = Signal(5)
        window = Signal(layout)
        m.d.comb += [window.rows.eq(rows), window.cols.eq(cols),
                     window.pad_rows.eq(cfg.kernel_h - rows),
                     window.pad_cols.eq(cfg.kernel_w - cols), window.out.eq(out_addr),
                     windows.w_data.eq(window.as_value())]
        m.d.comb += [reader.cmd.payload.addr.eq(cmd_addr),
                     reader.cmd.payload.beats.eq(cmd_beats)]
        walking = Signal()
        walked = Signal()                      # every window queued and read
        with m.FSM(name="walker") as walker:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [line_step.eq(cfg.stride_h * cfg.src_line),
                                 top_back.eq(cfg.pad_top * cfg.src_line),
                                 slice_left.eq(cfg.splits_m1), in0.eq(0), out0.eq(0),
                                 pad_left.eq(cfg.pad_left),
                                 in_w.eq(Mux(cfg.splits_m1 == 0, cfg.w, cfg.in_first)),
                                 out_w.eq(Mux(cfg.splits_m1 == 0, cfg.out_w, cfg.out_first)),
                                 next_in0.eq(cfg.in_first - (cfg.kernel_w - cfg.stride_w)),
                                 next_out0.eq(cfg.out_first), walked.eq(0), walking.eq(1)]
                    m.next = "SLICE"
            with m.State("SLICE"):             # a slice's first surface
                m.d.sync += [surface.eq(0), surf_addr.eq(cfg.src), dsurf_addr.eq(cfg.dst)]
                m.next = "SURFACE"
            with m.State("SURFACE"):           # a surface's first row
                m.d.sync += [oy.eq(0), ys.eq(-cfg.pad_top),
                             row_base.eq(surf_addr - top_back + (in0 - pad_left) * atom),
                             out_row.eq(dsurf_addr + out0 * atom)]
                m.next = "ROW"
            with m.State("ROW"):               # a row's first window
                m.d.sync += [ox.eq(0), xs.eq(-pad_left), win_addr.eq(row_base),
                             out_addr.eq(out_row)]
                m.next = "WINDOW"
            with m.State("WINDOW"):            # queue the window, then read its rows
                with m.If(windows.w_rdy):
                    m.d.sync += [cmd_addr.eq(first), cmd_beats.eq(cols),
                                 cmd_rows.eq(Mux(cols == 0, 0, rows))]
                    m.next = "READ"
            with m.State("READ"):
                with m.If(cmd_rows == 0):
                    m.next = "NEXT"
                with m.Elif(reader.cmd.ready):
                    m.d.sync += [cmd_rows.eq(cmd_rows - 1), cmd_addr.eq(cmd_addr + cfg.src_line)]
            with m.State("NEXT"):              # the next window, row, surface or slice
                m.d.sync += [ox.eq(ox + 1), xs.eq(xs + cfg.stride_w),
                             win_addr.eq(win_addr + cfg.stride_w * atom),
                             out_addr.eq(out_addr + atom)]
                m.next = "WINDOW"
                with m.If(ox + 1 == out_w):
                    m.d.sync += [oy.eq(oy + 1), ys.eq(ys + cfg.stride_h),
                                 row_base.eq(row_base + line_step),
                                 out_row.eq(out_row + cfg.dst_line)]
                    m.next = "ROW"
                    with m.If(oy + 1 == cfg.out_h):
                        m.d.sync += [surface.eq(surface + 1),
                                     surf_addr.eq(surf_addr + cfg.src_surf),
                                     dsurf_addr.eq(dsurf_addr + cfg.dst_surf)]
                        m.next = "SURFACE"
                        with m.If(surface + 1 == cfg.surfaces):
                            m.d.sync += [slice_left.eq(slice_left - 1), in0.eq(next_in0),
                                         out0.eq(next_out0), pad_left.eq(0),
                                         in_w.eq(Mux(slice_left == 1, cfg.in_last, cfg.in_mid)
                                                 + cfg.kernel_w - cfg.stride_w),
                                         out_w.eq(Mux(slice_left == 1, cfg.out_last,
                                                      cfg.out_mid)),
                                         next_in0.eq(next_in0 + cfg.in_mid),
                                         next_out0.eq(next_out0 + cfg.out_mid)]
                            m.next = "SLICE"
                            with m.If(slice_left == 0):
                                m.d.sync += [walking.eq(0), walked.eq(1)]
                                m.next = "IDLE"
        m.d.comb += [windows.w_en.eq(walker.ongoing("WINDOW")),
                     reader.cmd.valid.eq(walker.ongoing("READ") & (cmd_rows != 0))]

        # ---- the reducer: a window's words folded lane by lane --------------------------
        acc = [Signal(signed(SUM_BITS), name=f"acc{i}") for i in range(lanes)]
        cur = Signal(layout)
        rows_left, cols_left = Signal(5), Signal(5)
        reducing = Signal()
        handing = Signal()                     # the window is folded: into the pipeline
        method = cfg.method
        word = reader.data.payload
        start_value = Mux(method == MAX, -128, Mux(method == MIN, 127, 0))
        advance = Signal()                     # the pipeline moves
        m.d.comb += [windows.r_en.eq(~reducing & ~handing),
                     reader.data.ready.eq(reducing)]
        head = data.View(layout, windows.r_data)
        with m.If(windows.r_rdy & ~reducing & ~handing):
            m.d.sync += [cur.eq(head), rows_left.eq(head.rows), cols_left.eq(head.cols)]
            m.d.sync += [a.eq(start_value) for a in acc]
            empty = (head.rows == 0) | (head.cols == 0)
            m.d.sync += [reducing.eq(~empty), handing.eq(empty)]
        with m.If(reducing & reader.data.valid):
            for i, a in enumerate(acc):
                v = word[8 * i:8 * i + 8].as_signed()
                m.d.sync += a.eq(Mux(method == MAX, Mux(v > a, v, a),
                                     Mux(method == MIN, Mux(v < a, v, a), a + v)))
            last_col = cols_left == 1
            m.d.sync += cols_left.eq(Mux(last_col, cur.cols, cols_left - 1))
            with m.If(last_col):
                m.d.sync += rows_left.eq(rows_left - 1)
                with m.If(rows_left == 1):
                    m.d.sync += [reducing.eq(0), handing.eq(1)]
        with m.If(handing & advance):
            m.d.sync += handing.eq(0)

        # ---- the pipeline: padding, the reciprocals, saturation -------------------------
        # stage 1: the padding's share added (average)
        pv = cfg.pad_values
        pad_term = Signal(signed(SUM_BITS))
        m.d.comb += pad_term.eq((cfg.kernel_h - cur.pad_rows) * pv[cur.pad_cols]
                                + cfg.kernel_w * pv[cur.pad_rows])
        s1_valid, s2_valid, s3_valid = Signal(), Signal(), Signal()
        s1 = [Signal(signed(SUM_BITS), name=f"s1_{i}") for i in range(lanes)]
        s2 = [Signal(signed(SUM_BITS + 2), name=f"s2_{i}") for i in range(lanes)]
        s3 = [Signal(signed(8), name=f"s3_{i}") for i in range(lanes)]
        s1_out, s2_out, s3_out = (Signal(ADDR_BITS, name=f"s{k}_out") for k in (1, 2, 3))
        m.d.comb += advance.eq(~s3_valid | writer.req.ready)
        average = method == AVERAGE
        with m.If(advance):
            m.d.sync += [s1_valid.eq(handing), s2_valid.eq(s1_valid), s3_valid.eq(s2_valid),
                         s1_out.eq(cur.out), s2_out.eq(s1_out), s3_out.eq(s2_out)]
            for i in range(lanes):
                m.d.sync += s1[i].eq(Mux(average, acc[i] + pad_term, acc[i]))
                # stage 2: the width's reciprocal; stage 3: the height's, then saturation
                by_w = _round16(m, s1[i] * cfg.recip_w, f"by_w{i}")
                m.d.sync += s2[i].eq(Mux(average, by_w, s1[i]))
                by_h = _round16(m, s2[i] * cfg.recip_h, f"by_h{i}")
                value = Mux(average, by_h, s2[i])
                m.d.sync += s3[i].eq(Mux(value > 127, 127, Mux(value < -128, -128, value)))
        m.d.comb += [writer.req.valid.eq(s3_valid), writer.req.payload.addr.eq(s3_out),
                     writer.req.payload.data.eq(Cat(*(v.as_unsigned() for v in s3))),
                     writer.req.payload.strb.eq((1 << atom) - 1)]

        # ---- completion: every window written and answered ------------------------------
        settled = Signal()
        # (the queue's level: a window written shows at its read side a cycle later)
        m.d.comb += settled.eq(walked & (windows.level == 0) & ~reducing & ~handing & ~s1_valid
                               & ~s2_valid & ~s3_valid & ~reader.busy & writer.idle)
        m.d.sync += self.done.eq(0)
        with m.If(settled & ~self.done):
            m.d.sync += [walked.eq(0), self.done.eq(1)]
        # (through the cycle of ``done``, while the units' enables are still set)
        m.d.comb += self.busy.eq(walking | walked | self.done)
        return m
