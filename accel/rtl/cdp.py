"""CDP from memory: local response normalisation and the lookup table on int8, on AXI4.

The cross-channel data processor reads its input cube through CDP_RDMA and writes a cube
of the same shape, atom by atom.  It computes what the cmodel's :mod:`accel.cmod.cdp`
computes, byte for byte, one int8 lane per cycle (nv_small's CDP throughput):

1. **input converter**: ``v = sat9(round((x - DATIN_OFFSET[7:0]) * DATIN_SCALE >>
   DATIN_SHIFTER))``, rounded half away from zero.  The lanes of the last surface past
   ``C`` read as the offset itself, so their ``v`` is 0, as are the channels outside the
   cube that a sum reaches;
2. **square sum** of ``v`` over the ``2n+1`` channels centred on each one (``NORMALZ_LEN``
   n = 1..4), or ``v`` itself with ``SQSUM_BYPASS``;
3. **lookup** of the sum in both tables (:class:`LutLookup`) and the choice between them
   by the priorities of ``S_LUT_CFG``;
4. the table's value times ``v``, or the value alone with ``MUL_BYPASS``;
5. **output converter**: ``sat8(round((y - DATOUT_OFFSET[24:0]) * DATOUT_SCALE >>
   DATOUT_SHIFTER))``.

How: a walker reads the cube point by point (row, column, then surface), one word per
command.  A serializer hands the lanes of each word on, one a cycle, in channel order; a
nine-lane window over the converted lanes gives each channel its neighbours' squares,
masked at the point's first and last channel.  Each lane then runs down a pipeline that
always advances; the lanes are packed back into words, queued, and written with the
destination's strides.  Lanes enter the window only while the queue has room for every
lane on its way (credits), so the pipeline never has to stop.

The LUT's two tables are block memories written through ``S_LUT_ACCESS_CFG`` and
``S_LUT_ACCESS_DATA`` (the ``lut_*`` ports: the register's value the cycle its write lands,
with a strobe).  Not built: reading the tables back through ``S_LUT_ACCESS_DATA``, and the
``D_OUT_SATURATION`` and ``D_PERF_LUT_*`` counters (NVIDIA's traces check memory only).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from accel.config import HwConfig
from accel.rtl.axi import AxiReader, AxiWriter, read_signature, write_signature
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS

#: the CDP's units, its read DMA first (enabled together, completed together)
CDP_UNITS = ("NVDLA_CDP_RDMA", "NVDLA_CDP")
#: channels of context on each side of a channel: (9 - 1) / 2
HALO = 4
#: output words queued ahead of the write DMA (the credits: lanes on their way)
OUT_WORDS = 4
#: bits of a LUT input: a square sum (at most 9 x 256**2) or a converted lane, signed
LUT_IN_BITS = 21
#: the LUT's arithmetic wraps at 64 bits where the cmodel's int64 does
WRAP_BITS = 64
#: entries of the LE and LO tables (NVDLA's: 65 and 257)
LE_ENTRIES, LO_ENTRIES = 65, 257


class LutConfigLayout(data.StructLayout):
    """``S_LUT_*`` as the lookup uses them (:class:`accel.cmod.lut.LutConfig`)."""

    def __init__(self) -> None:
        table = {"start": signed(38), "end": signed(38),
                 "uflow_scale": signed(16), "oflow_scale": signed(16),
                 "uflow_shift": signed(5), "oflow_shift": signed(5)}
        super().__init__({
            "le_exponent": 1, "uflow_lo": 1, "oflow_lo": 1, "hybrid_lo": 1,
            "le_offset": signed(8),
            # the index selects widened as the cmodel widens them: bit 5 set gives
            # (field & 63) - 64, clear gives the 8-bit field itself
            "le_select": signed(9), "lo_select": signed(9),
            "le": data.StructLayout(table), "lo": data.StructLayout(table),
        })


class CdpConfigLayout(data.StructLayout):
    """One operation's registers as the CDP uses them (sizes as counts)."""

    def __init__(self) -> None:
        super().__init__({
            "surfaces": SIZE_BITS, "h": SIZE_BITS, "w": SIZE_BITS,
            "last_lanes": 4,                    # channels in the last surface, 1..atom
            "in_offset": signed(8), "in_scale": signed(16), "in_shift": 5,
            "out_offset": signed(25), "out_scale": signed(16), "out_shift": 6,
            "sqsum_bypass": 1, "mul_bypass": 1, "normalz": 2,
            "lut": LutConfigLayout(),
            "src": ADDR_BITS, "src_line": ADDR_BITS, "src_surf": ADDR_BITS,
            "dst": ADDR_BITS, "dst_line": ADDR_BITS, "dst_surf": ADDR_BITS,
        })


def _select(raw):
    """An 8-bit ``LUT_*_INDEX_SELECT`` widened like the cmodel (``_sext6_like_cmod``)."""
    return Mux(raw[5], raw[:6].as_signed(), raw.as_signed() & 0xFF)


def config_from_registers(field, hw: HwConfig):
    """A function of a :class:`CdpConfigLayout` signal giving its assignments from the
    registers (``field(unit, reg, name=None)``: the consumer group's ``D_`` registers,
    the ``S_LUT_*`` ones as written)."""
    cdp, rdma = "NVDLA_CDP", "NVDLA_CDP_RDMA"
    shift = hw.atom_size.bit_length() - 1

    def assign(cfg) -> list:
        c_m1 = field(rdma, "D_DATA_CUBE_CHANNEL", "CHANNEL")
        lut = cfg.lut
        out = [
            cfg.surfaces.eq((c_m1 >> shift) + 1),
            cfg.last_lanes.eq(c_m1[:shift] + 1),
            cfg.h.eq(field(rdma, "D_DATA_CUBE_HEIGHT", "HEIGHT") + 1),
            cfg.w.eq(field(rdma, "D_DATA_CUBE_WIDTH", "WIDTH") + 1),
            cfg.in_offset.eq(field(cdp, "D_DATIN_OFFSET")[:8].as_signed()),
            cfg.in_scale.eq(field(cdp, "D_DATIN_SCALE")[:16].as_signed()),
            cfg.in_shift.eq(field(cdp, "D_DATIN_SHIFTER", "DATIN_SHIFTER")),
            cfg.out_offset.eq(field(cdp, "D_DATOUT_OFFSET")[:25].as_signed()),
            cfg.out_scale.eq(field(cdp, "D_DATOUT_SCALE")[:16].as_signed()),
            cfg.out_shift.eq(field(cdp, "D_DATOUT_SHIFTER", "DATOUT_SHIFTER")),
            cfg.sqsum_bypass.eq(field(cdp, "D_FUNC_BYPASS", "SQSUM_BYPASS")),
            cfg.mul_bypass.eq(field(cdp, "D_FUNC_BYPASS", "MUL_BYPASS")),
            cfg.normalz.eq(field(cdp, "D_LRN_CFG", "NORMALZ_LEN")),
            cfg.src.eq(field(rdma, "D_SRC_BASE_ADDR_LOW")),
            cfg.src_line.eq(field(rdma, "D_SRC_LINE_STRIDE")),
            cfg.src_surf.eq(field(rdma, "D_SRC_SURFACE_STRIDE")),
            cfg.dst.eq(field(cdp, "D_DST_BASE_ADDR_LOW")),
            cfg.dst_line.eq(field(cdp, "D_DST_LINE_STRIDE")),
            cfg.dst_surf.eq(field(cdp, "D_DST_SURFACE_STRIDE")),
            lut.le_exponent.eq(field(cdp, "S_LUT_CFG", "LUT_LE_FUNCTION") == 0),
            lut.uflow_lo.eq(field(cdp, "S_LUT_CFG", "LUT_UFLOW_PRIORITY")),
            lut.oflow_lo.eq(field(cdp, "S_LUT_CFG", "LUT_OFLOW_PRIORITY")),
            lut.hybrid_lo.eq(field(cdp, "S_LUT_CFG", "LUT_HYBRID_PRIORITY")),
            lut.le_offset.eq(field(cdp, "S_LUT_INFO", "LUT_LE_INDEX_OFFSET").as_signed()),
            lut.le_select.eq(_select(field(cdp, "S_LUT_INFO", "LUT_LE_INDEX_SELECT"))),
            lut.lo_select.eq(_select(field(cdp, "S_LUT_INFO", "LUT_LO_INDEX_SELECT"))),
        ]
        for name in ("le", "lo"):
            table, up = getattr(lut, name), name.upper()
            for end in ("start", "end"):
                reg = f"S_LUT_{up}_{end.upper()}"
                out.append(getattr(table, end).eq(Cat(field(cdp, f"{reg}_LOW"),
                                                      field(cdp, f"{reg}_HIGH")[:6])))
            for flow in ("uflow", "oflow"):
                f = f"LUT_{up}_SLOPE_{flow.upper()}"
                out += [getattr(table, f"{flow}_scale").eq(
                            field(cdp, f"S_LUT_{up}_SLOPE_SCALE", f"{f}_SCALE").as_signed()),
                        getattr(table, f"{flow}_shift").eq(
                            field(cdp, f"S_LUT_{up}_SLOPE_SHIFT", f"{f}_SHIFT").as_signed())]
        return out
    return assign


def round_shift(x, shift, width: int):
    """``x >> shift`` rounded half away from zero, ``shift`` unsigned and variable
    (:func:`accel.arith.shift_round`); computed in ``width`` signed bits, which must hold
    ``x`` plus ``2**(shift - 1)``."""
    half = (Const(1, width) << shift)[1:width + 1]        # 2**(shift-1); 0 for shift 0
    fix = Mux(shift == 0, 0, x.as_signed() < 0)
    return ((x.as_signed() + half.as_signed() - fix).as_signed()[:width].as_signed()
            >> shift)


def saturate(x, bits: int):
    """``x`` clamped to the signed ``bits`` range."""
    hi, lo = (1 << (bits - 1)) - 1, -(1 << (bits - 1))
    return Mux(x > hi, hi, Mux(x < lo, lo, x))


def _wrap(x):
    """``x`` as the cmodel's int64 holds it (two's complement, low 64 bits)."""
    return x.as_signed()[:WRAP_BITS].as_signed()


class LutLookup(wiring.Component):
    """NVDLA's int8 lookup (:func:`accel.cmod.lut.lookup_classes`) of one value a cycle,
    in :data:`LATENCY` pipeline stages that always advance.

    Both tables are evaluated: the LE table linear or exponential, the LO table linear;
    inside a table the two neighbouring entries are interpolated with a 16-bit fraction,
    outside it the first or last entry is extrapolated with the under/overflow slope.  The
    result is the table the priorities choose, saturated to int16.

    Attributes
    ----------
    cfg : ``In(LutConfigLayout())``
    valid, x, tag : ``In``: a value to look up this cycle, and a tag carried beside it
    out_valid, out, out_tag : ``Out``: :data:`LATENCY` cycles later
    write_cfg, write_cfg_value : ``In``: ``S_LUT_ACCESS_CFG`` was written with this value
    write_data, write_data_value : ``In``: ``S_LUT_ACCESS_DATA`` likewise
    """

    LATENCY = 7

    def __init__(self, tag_bits: int) -> None:
        self.tag_bits = tag_bits
        super().__init__({
            "cfg": In(LutConfigLayout()),
            "valid": In(1), "x": In(signed(LUT_IN_BITS)), "tag": In(tag_bits),
            "out_valid": Out(1), "out": Out(signed(16)), "out_tag": Out(tag_bits),
            "write_cfg": In(1), "write_cfg_value": In(32),
            "write_data": In(1), "write_data_value": In(16),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        tables = {}
        for name, depth in (("le", LE_ENTRIES), ("lo", LO_ENTRIES)):
            mem = memory.Memory(shape=signed(16), depth=depth, init=[])
            m.submodules[f"{name}_table"] = mem
            tables[name] = (mem, depth, mem.write_port(), mem.read_port(), mem.read_port())
        self._access_port(m, tables)
        # the valid flag and the tag travel beside the stages
        stages = range(1, self.LATENCY + 1)
        valid = [self.valid] + [Signal(name=f"valid{i}") for i in stages]
        tag = [self.tag] + [Signal(self.tag_bits, name=f"tag{i}") for i in stages]
        m.d.sync += [valid[i].eq(valid[i - 1]) for i in stages]
        m.d.sync += [tag[i].eq(tag[i - 1]) for i in stages]

        # ---- stage 1: the value against each table's start and end ----------------------
        t = {n: Signal(signed(40), name=f"{n}_t") for n in tables}
        over_dx = {n: Signal(signed(40), name=f"{n}_over_dx") for n in tables}
        under_dx = {n: Signal(signed(WRAP_BITS), name=f"{n}_under_dx") for n in tables}
        # (an exponential underflow extrapolates from start + 2**offset)
        offset = cfg.le_offset
        adj = Mux(cfg.le_exponent & (offset >= 0), _wrap(Const(1, 65) << offset[:6]), 0)
        for n in tables:
            table = getattr(cfg, n)
            m.d.sync += [t[n].eq(self.x - table.start), over_dx[n].eq(self.x - table.end),
                         under_dx[n].eq(_wrap(self.x - table.start - (adj if n == "le" else 0)))]

        # ---- stage 2: the linear index and fraction; the leading one of LE's ----------------
        t2 = {n: Signal(signed(40), name=f"{n}_t2") for n in tables}
        lin_idx = {n: Signal(signed(WRAP_BITS), name=f"{n}_lin_idx") for n in tables}
        lin_frac = {n: Signal(16, name=f"{n}_lin_frac") for n in tables}
        log = Signal(6, name="le_log")
        carried = {n: (Signal(signed(40), name=f"{n}_over_dx2"),
                       Signal(signed(WRAP_BITS), name=f"{n}_under_dx2")) for n in tables}
        for n in tables:
            tn = t[n]
            select = cfg.le_select if n == "le" else cfg.lo_select
            frac = self._fraction16(tn & ((Const(1, 33) << select[:5]) - 1), select)
            m.d.sync += [t2[n].eq(tn),
                         lin_idx[n].eq(Mux(select < 0, _wrap(tn << (-select)[:6]),
                                           tn >> select[:6])),
                         lin_frac[n].eq(Mux(select < 0, 0, frac)),
                         carried[n][0].eq(over_dx[n]), carried[n][1].eq(under_dx[n])]
        leading = Signal(6)
        for bit in range(40):
            with m.If(t["le"][bit]):
                m.d.comb += leading.eq(bit)
        m.d.sync += log.eq(leading)

        # ---- stage 3: index, fraction and flow of each table ----------------------------
        flows = {}
        for n, (_, depth, _, read0, read1) in tables.items():
            table, last = getattr(cfg, n), depth - 1
            idx, frac16 = Signal(signed(WRAP_BITS), name=f"{n}_idx"), Signal(16,
                                                                             name=f"{n}_frac")
            m.d.comb += [idx.eq(lin_idx[n]), frac16.eq(lin_frac[n])]
            if n == "le":
                # exponential: the index is floor(log2 t) - offset, the fraction t's bits
                # below its leading one
                below = t2[n] & ((Const(1, 41) << log)[:41] - 1)
                with m.If(cfg.le_exponent):
                    m.d.comb += [idx.eq(log - offset),
                                 frac16.eq(self._fraction16(below, log))]
            under = (idx < 0) | (t2[n] <= 0)
            over = ~under & (idx >= last)
            f = {"under": Signal(name=f"{n}_under"), "over": Signal(name=f"{n}_over"),
                 "idx": Signal(9, name=f"{n}_idx3"),
                 "frac": Signal(16, name=f"{n}_frac3"),
                 "dx": Signal(signed(WRAP_BITS), name=f"{n}_dx"),
                 "scale": Signal(signed(16), name=f"{n}_scale"),
                 "shift": Signal(signed(5), name=f"{n}_shift")}
            m.d.sync += [f["under"].eq(under), f["over"].eq(over), f["frac"].eq(frac16),
                         f["idx"].eq(Mux(under, 0, Mux(over, last, idx[:9]))),
                         f["dx"].eq(Mux(under, carried[n][1], carried[n][0])),
                         f["scale"].eq(Mux(under, table.uflow_scale, table.oflow_scale)),
                         f["shift"].eq(Mux(under, table.uflow_shift, table.oflow_shift))]
            # the entries are read from the stage's registers: the data come a cycle later
            m.d.comb += [read0.addr.eq(f["idx"]),
                         read1.addr.eq(Mux(f["over"], last, f["idx"] + 1))]
            flows[n] = f

        # ---- stage 4: the entries arrive; stage 5: the products (interpolation, slope) ----
        prods = {}
        for n, (_, _, _, read0, read1) in tables.items():
            f = {k: Signal.like(v, name=f"{v.name}_4") for k, v in flows[n].items()}
            m.d.sync += [f[k].eq(v) for k, v in flows[n].items()]
            p = {"base": Signal(signed(16), name=f"{n}_base"),
                 "step": Signal(signed(34), name=f"{n}_step"),
                 "slope": Signal(signed(WRAP_BITS), name=f"{n}_slope"),
                 "shift": Signal(signed(5), name=f"{n}_shift4"),
                 "hit": Signal(name=f"{n}_hit"), "under": Signal(name=f"{n}_under4"),
                 "over": Signal(name=f"{n}_over4")}
            m.d.sync += [p["base"].eq(read0.data),
                         p["step"].eq((read1.data - read0.data) * f["frac"]),
                         p["slope"].eq(_wrap(f["dx"] * f["scale"])),
                         p["shift"].eq(f["shift"]),
                         p["hit"].eq(~f["under"] & ~f["over"]), p["under"].eq(f["under"]),
                         p["over"].eq(f["over"])]
            prods[n] = p

        # ---- stage 6: rounded and shifted ------------------------------------------------
        rounded = {}
        for n, p in prods.items():
            r = {"interp": Signal(signed(19), name=f"{n}_interp"),
                 "shifted": Signal(signed(18), name=f"{n}_shifted"),
                 "base": Signal(signed(16), name=f"{n}_base5")}
            sh = p["shift"]
            m.d.sync += [
                r["interp"].eq(p["base"] + round_shift(p["step"], 16, 36)),
                r["shifted"].eq(Mux(sh < 0, saturate(p["slope"] << (-sh)[:5], 18),
                                    saturate(round_shift(p["slope"], sh[:4], WRAP_BITS + 1),
                                             18))),
                r["base"].eq(p["base"])]
            rounded[n] = r
        le, lo = prods["le"], prods["lo"]
        uflow = le["under"] & lo["under"]
        oflow = ~uflow & le["over"] & lo["over"]
        only = ~uflow & ~oflow & (le["hit"] ^ lo["hit"])
        hybrid = ~uflow & ~oflow & ~(le["hit"] ^ lo["hit"])
        pick_lo, hits = Signal(), {n: Signal(name=f"{n}_hit5") for n in tables}
        m.d.sync += [pick_lo.eq((uflow & cfg.uflow_lo) | (oflow & cfg.oflow_lo)
                                | (only & lo["hit"]) | (hybrid & cfg.hybrid_lo)),
                     hits["le"].eq(le["hit"]), hits["lo"].eq(lo["hit"])]

        # ---- stage 7: added to the entry, saturated, the table chosen --------------------
        value = {n: saturate(Mux(hits[n], r["interp"], r["base"] + r["shifted"]), 16)
                 for n, r in rounded.items()}
        m.d.sync += self.out.eq(Mux(pick_lo, value["lo"], value["le"]))
        m.d.comb += [self.out_valid.eq(valid[-1]), self.out_tag.eq(tag[-1])]
        return m

    @staticmethod
    def _fraction16(frac, bits):
        """A ``bits``-bit fraction rescaled to 16 bits (:func:`accel.cmod.lut._fraction16`):
        shifted right by ``bits - 16`` (mod 64) or left by ``16 - bits``."""
        down = frac >> (bits - 16)[:6]
        up = (frac << (16 - bits)[:5])[:16]
        return Mux(bits > 16, down, up)[:16]

    def _access_port(self, m: Module, tables: dict) -> None:
        """``S_LUT_ACCESS_CFG`` sets the address, table and write mode; each
        ``S_LUT_ACCESS_DATA`` write in write mode fills the entry and steps the address,
        which stops at the table's last entry (:class:`accel.cmod.lut.LutRam`).  An address
        past the last entry writes nothing (the cmodel refuses it)."""
        addr, table, writing = Signal(10), Signal(), Signal()
        with m.If(self.write_cfg):
            v = self.write_cfg_value
            m.d.sync += [addr.eq(v[:10]), table.eq(v[16]), writing.eq(v[17])]
        for index, (_, depth, write, _, _) in enumerate(tables.values()):
            mine = self.write_data & writing & (table == index) & (addr < depth)
            m.d.comb += [write.addr.eq(addr), write.data.eq(self.write_data_value),
                         write.en.eq(mine)]
            with m.If(mine & (addr < depth - 1)):
                m.d.sync += addr.eq(addr + 1)


class Cdp(wiring.Component):
    """See the module docstring.

    Attributes
    ----------
    cfg : ``In(CdpConfigLayout())``, held while the operation runs
    start : ``In(1)``, a pulse: the operation starts
    done : ``Out(1)``, a pulse: its last write was answered
    busy : ``Out(1)`` from ``start`` to ``done``, both included
    bus_error : ``Out(1)``, sticky: an AXI response was not OKAY
    lut_cfg, lut_cfg_value, lut_data, lut_data_value : writes of ``S_LUT_ACCESS_CFG`` and
        ``S_LUT_ACCESS_DATA`` (see :class:`LutLookup`)
    axi_read, axi_write : the AXI4 read and write channels
    """

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        super().__init__({
            "cfg": In(CdpConfigLayout()), "start": In(1), "done": Out(1), "busy": Out(1),
            "bus_error": Out(1),
            "lut_cfg": In(1), "lut_cfg_value": In(32),
            "lut_data": In(1), "lut_data_value": In(16),
            "axi_read": Out(read_signature(ADDR_BITS, 8 * hw.atom_size)),
            "axi_write": Out(write_signature(ADDR_BITS, 8 * hw.atom_size)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        atom, cfg = self.hw.atom_size, self.cfg
        m.submodules.reader = reader = AxiReader(ADDR_BITS, atom)
        m.submodules.writer = writer = AxiWriter(ADDR_BITS, atom)
        wiring.connect(m, wiring.flipped(self.axi_read), reader.axi)
        wiring.connect(m, wiring.flipped(self.axi_write), writer.axi)
        m.d.comb += self.bus_error.eq(reader.bus_error | writer.bus_error)
        m.submodules.words = words = fifo.SyncFIFOBuffered(width=8 * atom, depth=OUT_WORDS)

        # ---- the walker: one read per word, surfaces innermost ----------------------------
        reading, walked = Signal(), Signal()
        rd = self._walk(m, "read", cfg.src, cfg.src_line, cfg.src_surf,
                        reader.cmd.valid & reader.cmd.ready)
        m.d.comb += [reader.cmd.valid.eq(reading), reader.cmd.payload.addr.eq(rd["addr"]),
                     reader.cmd.payload.beats.eq(1)]
        with m.If(self.start):
            m.d.sync += [reading.eq(1), walked.eq(0)]
        with m.Elif(reading & reader.cmd.ready & rd["last"]):
            m.d.sync += [reading.eq(0), walked.eq(1)]

        # ---- the serializer: a lane a cycle while the queue has room for it ----------------
        in_flight = Signal(range(OUT_WORDS * atom + 1))
        credit = in_flight < OUT_WORDS * atom
        word, have, lane = Signal(8 * atom), Signal(), Signal(range(atom))
        surface = Signal(SIZE_BITS)            # the word's surface within its point
        flush = Signal(range(HALO + 1))        # flush lanes still to push after the last
        take = have & credit
        m.d.comb += reader.data.ready.eq(~have | (take & (lane == atom - 1)))
        with m.If(reader.data.valid & reader.data.ready):
            m.d.sync += [word.eq(reader.data.payload), have.eq(1)]
        with m.Elif(take & (lane == atom - 1)):
            m.d.sync += have.eq(0)
        last_surface = surface == cfg.surfaces - 1
        word_done = take & (lane == atom - 1)
        serialized = self._walk(m, "lanes", 0, 0, 0, word_done)
        with m.If(take):
            m.d.sync += lane.eq(lane + 1)
            with m.If(lane == atom - 1):
                m.d.sync += [lane.eq(0), surface.eq(Mux(last_surface, 0, surface + 1))]
                with m.If(serialized["last"]):
                    m.d.sync += flush.eq(HALO)
        with m.Elif(flush != 0):
            m.d.sync += flush.eq(flush - 1)
        with m.If(self.start):
            m.d.sync += [lane.eq(0), surface.eq(0), flush.eq(0)]
        x = word.word_select(lane, 8).as_signed()
        pad = last_surface & (lane >= cfg.last_lanes)

        # ---- the input converter and the square, four stages ------------------------------
        e0 = Signal(data.StructLayout({"lane": 1, "first": 1}))
        e0_x = Signal(signed(9))
        m.d.sync += [e0.lane.eq(take), e0.first.eq(take & (surface == 0) & (lane == 0)),
                     e0_x.eq(Mux(take & ~pad, x - cfg.in_offset, 0))]
        e1, e1_p = Signal.like(e0), Signal(signed(25))
        m.d.sync += [e1.eq(e0), e1_p.eq(e0_x * cfg.in_scale)]
        pushed = Signal()                      # a lane or a flush entered the window
        flushing = Signal()
        m.d.sync += flushing.eq(~take & (flush != 0))
        e2, e2_v = Signal.like(e0), Signal(signed(9))
        m.d.sync += [e2.eq(e1), e2_v.eq(saturate(round_shift(e1_p, cfg.in_shift, 42), 9)),
                     pushed.eq(0)]
        e3, e3_v, e3_sq = Signal.like(e0), Signal(signed(9)), Signal(17)
        m.d.sync += [e3.eq(e2), e3_v.eq(e2_v), e3_sq.eq(e2_v * e2_v)]
        flush_delay = [Signal(name=f"flush_{i}") for i in range(3)]
        m.d.sync += [flush_delay[0].eq(flushing), flush_delay[1].eq(flush_delay[0]),
                     flush_delay[2].eq(flush_delay[1])]

        # ---- the window: nine lanes, the centre's neighbours squared ------------------------
        span = 2 * HALO + 1
        entry = data.StructLayout({"v": signed(9), "sq": 17, "lane": 1, "first": 1})
        win = [Signal(entry, name=f"win{i}") for i in range(span)]
        arrive = Signal(entry)
        m.d.comb += [arrive.v.eq(e3_v), arrive.sq.eq(e3_sq), arrive.lane.eq(e3.lane),
                     arrive.first.eq(e3.first | ~e3.lane)]   # (a flush starts no point)
        with m.If(e3.lane | flush_delay[-1]):
            m.d.sync += [win[i].eq(win[i + 1]) for i in range(span - 1)]
            m.d.sync += [win[-1].eq(arrive), pushed.eq(1)]
        with m.If(self.start):
            m.d.sync += [w.eq(0) for w in win]
        centre = win[HALO]
        n = cfg.normalz + 1
        ahead_terms, behind_terms = [], []
        for j in range(1, HALO + 1):
            ahead = win[HALO + j]
            same_ahead = ~Cat(*(win[HALO + k].first for k in range(1, j + 1))).any()
            behind = win[HALO - j]
            same_behind = ~Cat(*(win[HALO - k].first for k in range(0, j))).any()
            ahead_terms.append(Mux((j <= n) & ahead.lane & same_ahead, ahead.sq, 0))
            behind_terms.append(Mux((j <= n) & behind.lane & same_behind, behind.sq, 0))
        # the sum in two stages: the neighbours on each side, then the three parts
        s0_valid, s0_v, s0_sq = Signal(), Signal(signed(9)), Signal(17)
        s0_ahead, s0_behind = Signal(19), Signal(19)
        m.d.sync += [s0_valid.eq(pushed & centre.lane), s0_v.eq(centre.v),
                     s0_sq.eq(centre.sq), s0_ahead.eq(sum(ahead_terms)),
                     s0_behind.eq(sum(behind_terms))]

        # ---- the lookup, the multiplier and the output converter ---------------------------
        p0_valid, p0_v = Signal(), Signal(signed(9))
        p0_x = Signal(signed(LUT_IN_BITS))
        m.d.sync += [p0_valid.eq(s0_valid), p0_v.eq(s0_v),
                     p0_x.eq(Mux(cfg.sqsum_bypass, s0_v, s0_sq + s0_ahead + s0_behind))]
        m.submodules.lut = lut = LutLookup(tag_bits=9)
        m.d.comb += [lut.cfg.eq(cfg.lut), lut.valid.eq(p0_valid), lut.x.eq(p0_x),
                     lut.tag.eq(p0_v),
                     lut.write_cfg.eq(self.lut_cfg), lut.write_cfg_value.eq(self.lut_cfg_value),
                     lut.write_data.eq(self.lut_data),
                     lut.write_data_value.eq(self.lut_data_value)]
        p1_valid, p1_y = Signal(), Signal(signed(25))
        m.d.sync += [p1_valid.eq(lut.out_valid),
                     p1_y.eq(Mux(cfg.mul_bypass, lut.out, lut.out * lut.out_tag.as_signed()))]
        p2_valid, p2_d = Signal(), Signal(signed(26))
        m.d.sync += [p2_valid.eq(p1_valid), p2_d.eq(p1_y - cfg.out_offset)]
        p3_valid, p3_p = Signal(), Signal(signed(42))
        m.d.sync += [p3_valid.eq(p2_valid), p3_p.eq(p2_d * cfg.out_scale)]
        # the rounding: the half added, then the shift and the saturation
        p4_valid, p4_r = Signal(), Signal(signed(66))
        half = (Const(1, 66) << cfg.out_shift)[1:67]
        fix = Mux(cfg.out_shift == 0, 0, p3_p < 0)
        m.d.sync += [p4_valid.eq(p3_valid), p4_r.eq(p3_p + half.as_signed() - fix)]
        p5_valid, p5_out = Signal(), Signal(signed(8))
        m.d.sync += [p5_valid.eq(p4_valid), p5_out.eq(saturate(p4_r >> cfg.out_shift, 8))]

        # ---- lanes packed into words, queued, written -------------------------------------
        packed, count = Signal(8 * atom), Signal(range(atom))
        m.d.comb += [words.w_data.eq(Cat(packed[8:], p5_out.as_unsigned())),
                     words.w_en.eq(p5_valid & (count == atom - 1))]
        with m.If(p5_valid):
            m.d.sync += [packed.eq(Cat(packed[8:], p5_out.as_unsigned())),
                         count.eq(Mux(count == atom - 1, 0, count + 1))]
        writing, written = Signal(), Signal()
        accepted = writer.req.valid & writer.req.ready
        wr = self._walk(m, "write", cfg.dst, cfg.dst_line, cfg.dst_surf, accepted)
        m.d.comb += [writer.req.valid.eq(words.r_rdy & writing),
                     writer.req.payload.addr.eq(wr["addr"]),
                     writer.req.payload.data.eq(words.r_data),
                     writer.req.payload.strb.eq((1 << atom) - 1),
                     words.r_en.eq(accepted)]
        m.d.sync += in_flight.eq(in_flight + take - Mux(accepted, atom, 0))
        with m.If(self.start):
            m.d.sync += [writing.eq(1), written.eq(0), count.eq(0), in_flight.eq(0)]
        with m.Elif(accepted & wr["last"]):
            m.d.sync += [writing.eq(0), written.eq(1)]

        # ---- completion: every word written and answered -----------------------------------
        m.d.sync += self.done.eq(0)
        with m.If(written & writer.idle & ~self.done):
            m.d.sync += [written.eq(0), self.done.eq(1)]
        m.d.comb += self.busy.eq(reading | walked | writing | written | self.done)
        with m.If(self.done):
            m.d.sync += walked.eq(0)
        return m

    def _walk(self, m: Module, name: str, base, line, surf, step) -> dict:
        """Addresses of the cube's words, row by row, column by column, surface innermost;
        the next on each ``step``; restarted by ``start``.  Counted up, no multiplier."""
        atom, cfg = self.hw.atom_size, self.cfg
        addr, point, row = (Signal(ADDR_BITS, name=f"{name}_{n}")
                            for n in ("addr", "point", "row"))
        s, x, y = (Signal(SIZE_BITS, name=f"{name}_{n}") for n in ("s", "x", "y"))
        last_s, last_x, last_y = s == cfg.surfaces - 1, x == cfg.w - 1, y == cfg.h - 1
        with m.If(self.start):
            m.d.sync += [addr.eq(base), point.eq(base), row.eq(base), s.eq(0), x.eq(0),
                         y.eq(0)]
        with m.Elif(step):
            m.d.sync += [s.eq(s + 1), addr.eq(addr + surf)]
            with m.If(last_s):
                m.d.sync += [s.eq(0), x.eq(x + 1), addr.eq(point + atom),
                             point.eq(point + atom)]
                with m.If(last_x):
                    m.d.sync += [x.eq(0), y.eq(y + 1), addr.eq(row + line),
                                 point.eq(row + line), row.eq(row + line)]
        return {"addr": addr, "last": last_s & last_x & last_y}
