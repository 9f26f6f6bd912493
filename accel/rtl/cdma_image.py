"""CDMA's image input: pitch-linear pixels read a row at a time, converted, and written
into the feature memory as the pre-extended windows the convolution then runs on.

With ``D_DATAIN_FORMAT.DATAIN_FORMAT = PIXEL`` NVDLA's CDMA reads an image instead of a
feature cube, writes its rows into the CBUF padded left and right, and the CSC reads
each output pixel's window of ``S`` pixels as one "channel-extended" atom run of
``S * C`` channels; the weights are stored as a ``R x 1`` kernel of those channels.
This engine does the same with one row of pixels at a time (the arithmetic and the
register facts are :mod:`accel.cmod.cdma_image`'s):

1. :class:`ImageCommands`: one read per image row, ``D_DAIN_ADDR_0 + y *
   D_LINE_STRIDE``, starting ``PIXEL_X_OFFSET`` pixels in (from the bus word that holds
   that pixel: a word holds two 4-byte pixels), at most two rows ahead of the writer.
2. The words pass CDMA's input converter (:class:`~accel.rtl.cdma.FeatureConverter`):
   each byte lane subtracts its channel's mean (``D_MEAN_*`` with ``MEAN_FORMAT``, else
   ``CVT_OFFSET``), read unsigned unless ``PIXEL_SIGN_OVERRIDE``.
3. :class:`ImageWriter`: each pixel's bytes are put in channel order (R, G, B, A / Y, U,
   V, A, the format's :data:`accel.pixel_formats.PIXEL_FORMATS`), the row goes into a
   line buffer (two rows, each in two banks: even and odd pixels), and from there the
   windows into the feature memory: atom ``g`` of output column ``ox`` is the padded
   pixels ``ox * SX + 2g`` and the one after it (``PAD_LEFT`` and ``PAD_RIGHT`` pixels
   hold ``D_ZERO_PADDING_VALUE``'s low byte, unconverted), at entry ``(g * H + y) *
   out_w + ox`` - the feature layout of a cube of ``S * C`` channels, ``H`` rows and
   ``out_w`` columns.

The engine then runs that cube as a direct convolution of ``R x 1`` kernels at x stride
1 without left padding (:class:`~accel.rtl.conv_engine.ConvEngine` latches that
geometry for image input), its rows, stride, top and bottom padding as programmed.
Image input is built for nv_small's shape (8-byte bus words, 8-channel atoms) and the
4-byte pixel formats of 8-bit components (:data:`IMAGE_FORMATS`), the ones nv_small's
``img_*`` traces use; the features are in once the last row is written (no overlap of
the convolution with the rows, which it would need all of for its first output row
only).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.pixel_formats import INT8, PIXEL_FORMATS
from accel.regs import field_get, lookup
from accel.rtl.axi import BEAT_BITS
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS, write_layout
from accel.rtl.memories import NO_COLLISION

#: bytes of a pixel and pixels of a bus word in the image path
PIXEL_BYTES, WORD_PIXELS = 4, 2
#: ``PIXEL_FORMAT`` code -> the byte of the 4-byte pixel that holds each channel (R, G,
#: B, A / Y, U, V, A): the packed formats of four 8-bit components
IMAGE_FORMATS: dict[int, tuple[int, ...]] = {
    code: fmt.channel_elements for code, fmt in PIXEL_FORMATS.items()
    if fmt.plane0_bytes == PIXEL_BYTES and not fmt.plane1_bytes and not fmt.packed_fields
    and fmt.precision == INT8}
#: padded pixels a line buffer row holds (``PAD_LEFT + W + PAD_RIGHT``, and the pixel
#: after the last: a window of an odd pixel count reads one more)
LINE_PIXELS = 1024


def image_shape_ok(hw: HwConfig) -> bool:
    """Whether the engine of ``hw`` has image input: nv_small's 8-byte words and atoms."""
    return hw.atom_size == 8 and hw.atomic_c == 8


def image_format_refusal(hw: HwConfig, code: int) -> str | None:
    """Why the engine of ``hw`` cannot read image input of ``PIXEL_FORMAT`` ``code`` (None:
    it can)."""
    if not image_shape_ok(hw):
        return (f"image input is implemented for nv_small's shape only (8-byte atoms of 8 "
                f"channels), not {hw.name}")
    if code not in IMAGE_FORMATS:
        name = PIXEL_FORMATS[code].name if code in PIXEL_FORMATS else f"code {code}"
        return (f"PIXEL_FORMAT={code} ({name}): the engine reads the 4-byte formats of 8-bit "
                f"components only ({', '.join(PIXEL_FORMATS[c].name for c in IMAGE_FORMATS)})")
    return None


def image_line_refusal(regs: dict[str, int]) -> str | None:
    """Why an image convolution with CDMA registers ``regs`` (name -> value, unwritten
    ones 0) does not fit the line buffer (None: it fits, or the input is not an image)."""
    def cdma(reg: str, name: str) -> int:
        return field_get(regs.get(reg, 0), lookup(f"NVDLA_CDMA.{reg}"), name)

    if not cdma("D_DATAIN_FORMAT", "DATAIN_FORMAT"):
        return None
    left, right = cdma("D_ZERO_PADDING", "PAD_LEFT"), cdma("D_ZERO_PADDING", "PAD_RIGHT")
    width = cdma("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
    if left + width + right + 1 > LINE_PIXELS:
        return (f"NVDLA_CDMA.D_DATAIN_SIZE_0: a padded image line of {left}+{width}+{right} "
                f"pixels does not fit the engine's line buffer ({LINE_PIXELS - 1} pixels)")
    return None


class ImageLayout(data.StructLayout):
    """The image registers the fetch latches (CDMA's, and the CSC's x stride; the right
    padding is every pixel past the image, so ``PAD_RIGHT`` only bounds the line,
    :func:`image_line_refusal`)."""

    def __init__(self) -> None:
        super().__init__({
            "enable": 1, "format": 6, "width": SIZE_BITS, "x_offset": 5, "pad_left": 5,
            "pad_value": signed(8), "stride_x": 4, "out_w": SIZE_BITS,
            # D_MEAN_FORMAT, and the means of R, G, B, A (Y, U, V, A)
            "mean_format": 1, "means": data.ArrayLayout(signed(16), PIXEL_BYTES),
        })


def format_order(code) -> Value:
    """The byte of the pixel word that holds each channel (R, G, B, A), two bits each, in
    ``PIXEL_FORMAT`` ``code``, for the formats of :data:`IMAGE_FORMATS` (others: the bytes
    in order; refused before a run)."""
    return Array(Cat(*(Const(b, 2) for b in IMAGE_FORMATS.get(c, (0, 1, 2, 3))))
                 for c in range(64))[code]


def lane_offsets(m: Module, cfg, name: str = "lane_offsets") -> list[Signal]:
    """The input converter's offset for each byte of a pixel word, as registers: with
    image input and ``MEAN_FORMAT`` the mean of the channel the byte holds in
    ``cfg.image.format``, else ``cfg.cvt.offset`` (``cfg``: the fetch's registers, which
    hold through the operation: a register stage after them, so the format's decode is
    not on the path of the registers' latch)."""
    img = cfg.image
    by_mean = Signal(name=f"{name}_by_mean")
    m.d.sync += by_mean.eq(img.enable & img.mean_format)
    inverse = {c: [order.index(b) for b in range(PIXEL_BYTES)]
               for c, order in IMAGE_FORMATS.items()}
    out = []
    for b in range(PIXEL_BYTES):
        channel = Signal(2, name=f"{name}_channel_{b}")
        m.d.sync += channel.eq(Array(Const(inverse.get(c, range(PIXEL_BYTES))[b], 2)
                                     for c in range(64))[img.format])
        offset = Signal(signed(16), name=f"{name}_{b}")
        m.d.sync += offset.eq(Mux(by_mean, Array(img.means)[channel], cfg.cvt.offset[b]))
        out.append(offset)
    return out


class ImageCommands(wiring.Component):
    """The image rows' read commands, at most two rows ahead of the writer.

    Attributes
    ----------
    launch : ``In(1)``; issue : ``In(1)`` the next row's command is taken now
    room : ``In(1)`` a line buffer row is free for it
    more : ``Out(1)`` rows are left; addr, beats : ``Out`` the next row's command
    """

    def __init__(self, cfg, hw: HwConfig) -> None:
        self.cfg, self.hw = cfg, hw
        super().__init__({"launch": In(1), "issue": In(1), "room": In(1), "more": Out(1),
                          "addr": Out(ADDR_BITS), "beats": Out(BEAT_BITS)})

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, img, bus = self.cfg, self.cfg.image, self.hw.atom_size
        rows_m1 = Signal(signed(SIZE_BITS + 1))         # rows after this one
        addr, beats, more = Signal(ADDR_BITS), Signal(BEAT_BITS), Signal()
        m.d.comb += [self.more.eq(more), self.addr.eq(addr), self.beats.eq(beats)]
        with m.If(self.issue):
            m.d.sync += [addr.eq(addr + cfg.line_stride), rows_m1.eq(rows_m1 - 1),
                         more.eq(rows_m1 != 0)]
        with m.If(self.launch):
            # the word of the first pixel, and the words up to the last
            first = img.x_offset >> 1
            m.d.sync += [addr.eq(cfg.feature_addr + first * bus),
                         beats.eq((img.x_offset[0] + img.width + 1) >> 1),
                         rows_m1.eq(cfg.h - 1), more.eq(img.enable & (cfg.h != 0))]
        return m


class ImageWriter(wiring.Component):
    """Converted image rows into the line buffer, and the windows from it into the
    feature memory (see the module docstring).

    Attributes
    ----------
    launch : ``In(1)``; valid, word : ``In`` a converted word of the current row
    issued : ``In(1)`` a row's command was taken; room : ``Out(1)`` another may be
    surface : ``In``: H * out_w, a channel group's entries
    write : ``Out``: the feature memory's write port
    level : ``Out``: entries complete (0 until the last row is written, then all)
    busy : ``Out(1)`` rows are being written
    """

    def __init__(self, cfg, hw: HwConfig, entries: int) -> None:
        self.cfg, self.hw, self.entries = cfg, hw, entries
        super().__init__({"launch": In(1), "valid": In(1), "word": In(8 * hw.atom_size),
                          "issued": In(1), "room": Out(1),
                          "surface": In(range(entries + 1)),
                          "write": Out(write_layout(hw, entries)),
                          "level": Out(range(entries + 1)), "busy": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg, img = self.cfg, self.cfg.image
        depth = LINE_PIXELS // WORD_PIXELS              # pixels of a row in a bank
        pixel = data.ArrayLayout(signed(8), PIXEL_BYTES)
        # bank b holds the row's pixels of parity b, two rows: address row * depth + p // 2
        banks = []
        for b in range(WORD_PIXELS):
            mem = memory.Memory(shape=pixel, depth=2 * depth, init=[])
            m.submodules[f"bank{b}{NO_COLLISION}"] = mem
            banks.append((mem.write_port(), mem.read_port()))

        # ---- rows in: bytes into channel order, then into the banks ------------------
        ordered = [Signal(pixel, name=f"ordered_{i}") for i in range(WORD_PIXELS)]
        order = Signal(2 * PIXEL_BYTES)     # the format's decode (cfg holds: a register)
        m.d.sync += order.eq(format_order(img.format))
        taken = Signal()
        for i, px in enumerate(ordered):
            lanes = [self.word[8 * (PIXEL_BYTES * i + b):8 * (PIXEL_BYTES * i + b + 1)]
                     for b in range(PIXEL_BYTES)]
            for ch in range(PIXEL_BYTES):
                pick = order[2 * ch:2 * ch + 2]
                m.d.sync += px[ch].eq(Mux(pick[1], Mux(pick[0], lanes[3], lanes[2]),
                                          Mux(pick[0], lanes[1], lanes[0])))
        m.d.sync += taken.eq(self.valid)
        # the padded index of the first pixel a word brings: PAD_LEFT - skip + 2k; its
        # bank is that parity (fixed for the operation), and the addresses of the word's
        # first and second pixels in their banks are signed (the skipped pixel of word 0 at
        # -1 is not written)
        odd = Signal()
        addr_a, addr_b = Signal(signed(SIZE_BITS + 1)), Signal(signed(SIZE_BITS + 1))
        words_m1, word_at = Signal(BEAT_BITS), Signal(BEAT_BITS)
        fill_row = Signal()                             # the buffer row being filled
        filled = Signal(2)                              # rows written, not yet emitted
        a_start, b_start = Signal.like(addr_a), Signal.like(addr_b)
        for b, (wp, _) in enumerate(banks):
            # the word's first pixel goes to the bank of its parity, its second to the other
            first = odd if b == 1 else ~odd
            a = Mux(first, addr_a, addr_b)
            m.d.comb += [wp.addr.eq(Cat(a[:depth.bit_length() - 1], fill_row)),
                         wp.data.eq(Mux(first, ordered[0].as_value(), ordered[1].as_value())),
                         wp.en.eq(taken & ~a[-1])]
        with m.If(taken):
            m.d.sync += [addr_a.eq(addr_a + 1), addr_b.eq(addr_b + 1),
                         word_at.eq(word_at + 1)]
            with m.If(word_at == words_m1):             # the row's last word
                m.d.sync += [addr_a.eq(a_start), addr_b.eq(b_start), word_at.eq(0),
                             fill_row.eq(~fill_row), filled.bit_select(fill_row, 1).eq(1)]

        # ---- windows out: pixels ox * SX + 2g and the next, per output column ----------
        emit_row = Signal()                             # the buffer row being emitted
        rows_left = Signal(SIZE_BITS + 1)
        ready = Signal()
        m.d.comb += ready.eq(filled.bit_select(emit_row, 1))
        ox, g = Signal(SIZE_BITS), Signal(SIZE_BITS)
        ox_last, g_last = Signal(), Signal()
        w_m2, g_m2 = Signal(SIZE_BITS), Signal(SIZE_BITS)
        q, q_column = Signal(SIZE_BITS + 1), Signal(SIZE_BITS + 1)   # padded pixel index
        point, entry, row_base = (Signal(range(self.entries)) for _ in range(3))
        pad_end = Signal(SIZE_BITS + 1)                 # PAD_LEFT + W
        # stage 1: the reads, and whether the two pixels are padding
        reading = Signal()
        m.d.comb += reading.eq(ready & (rows_left != 0))
        (_, r0), (_, r1) = banks
        half = depth.bit_length() - 1
        q_odd = q[0]
        m.d.comb += [r0.addr.eq(Cat((q[1:] + q_odd)[:half], emit_row)),
                     r1.addr.eq(Cat(q[1:][:half], emit_row)),
                     r0.en.eq(reading), r1.en.eq(reading)]
        swap, pad_a, pad_b, put = Signal(), Signal(), Signal(), Signal()
        put_entry = Signal.like(entry)
        m.d.sync += [swap.eq(q_odd), put.eq(reading), put_entry.eq(entry),
                     pad_a.eq((q < img.pad_left) | (q >= pad_end)),
                     pad_b.eq((q + 1 < img.pad_left) | (q + 1 >= pad_end))]
        with m.If(reading):
            m.d.sync += [g.eq(g + 1), g_last.eq(g == g_m2), q.eq(q + 2),
                         entry.eq(entry + self.surface)]
            with m.If(g_last):
                m.d.sync += [g.eq(0), g_last.eq(cfg.channel_groups == 1),
                             ox.eq(ox + 1), ox_last.eq(ox == w_m2),
                             q.eq(q_column + img.stride_x), q_column.eq(q_column + img.stride_x),
                             point.eq(point + 1), entry.eq(point + 1)]
                with m.If(ox_last):                     # the row is out: the next row
                    m.d.sync += [ox.eq(0), ox_last.eq(img.out_w == 1), q.eq(0),
                                 q_column.eq(0), point.eq(row_base + img.out_w),
                                 entry.eq(row_base + img.out_w),
                                 row_base.eq(row_base + img.out_w),
                                 emit_row.eq(~emit_row), rows_left.eq(rows_left - 1),
                                 filled.bit_select(emit_row, 1).eq(0)]
        # stage 2: the atom (padding replaced) into the feature memory
        pad = Cat(*([img.pad_value] * PIXEL_BYTES))
        lo = Mux(swap, r1.data.as_value(), r0.data.as_value())
        hi = Mux(swap, r0.data.as_value(), r1.data.as_value())
        fw = self.write
        m.d.comb += [fw.addr.eq(put_entry), fw.en.eq(put),
                     fw.data.as_value().eq(Cat(Mux(pad_a, pad, lo), Mux(pad_b, pad, hi)))]
        # a row's command waits for a free buffer row: rows issued and not yet emitted < 2
        owned = Signal(2)
        emitted = Signal()
        m.d.comb += emitted.eq(reading & g_last & ox_last)
        m.d.sync += owned.eq(owned + self.issued - emitted)
        m.d.comb += self.room.eq(~owned[1])
        # the features are in once the last row's last atom is written
        done = Signal()
        m.d.sync += done.eq(rows_left == 0)
        m.d.comb += [self.level.eq(Mux(done & ~put, self.entries, 0)),
                     self.busy.eq(~done | put)]
        # the first pixel's padded index, PAD_LEFT - skip (-1 when the skipped pixel of
        # word 0 has no place), and its bank addresses, floor halves
        base = Signal(signed(8))
        m.d.comb += base.eq(Cat(img.pad_left, Const(0, 3)).as_signed() - img.x_offset[0])
        with m.If(self.launch):
            m.d.sync += [odd.eq(base[0]),
                         addr_a.eq(base >> 1), a_start.eq(base >> 1),
                         addr_b.eq((base + 1) >> 1), b_start.eq((base + 1) >> 1),
                         words_m1.eq(((img.x_offset[0] + img.width + 1) >> 1) - 1),
                         word_at.eq(0), fill_row.eq(0), filled.eq(0), owned.eq(0),
                         emit_row.eq(0), rows_left.eq(Mux(img.enable, cfg.h, 0)),
                         done.eq(~img.enable),
                         ox.eq(0), g.eq(0), ox_last.eq(img.out_w == 1),
                         g_last.eq(cfg.channel_groups == 1),
                         w_m2.eq(img.out_w - 2), g_m2.eq(cfg.channel_groups - 2),
                         q.eq(0), q_column.eq(0), point.eq(0), entry.eq(0), row_base.eq(0),
                         pad_end.eq(img.pad_left + img.width)]
        return m
