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
from accel.rtl.cmac import DSP_PRODUCT_BITS, registered_multiply, use_ecp5_dsp
from accel.rtl.conv_layout import ADDR_BITS, SIZE_BITS
from accel.rtl.postproc import (
    PRODUCT_STAGES,
    ShiftSettings,
    half_minus_one,
    overflows,
    product_stages,
    round_carry,
    saturate,
    shift_round_stages,
)
from accel.rtl.timing import PassCount, delayed, shift_right_stages, stage

#: the CDP's units, its read DMA first (enabled together, completed together)
CDP_UNITS = ("NVDLA_CDP_RDMA", "NVDLA_CDP")
#: channels of context on each side of a channel: (9 - 1) / 2
HALO = 4
#: output words queued ahead of the write DMA (the credits: lanes on their way, more
#: than the pipeline from the serializer to the queue holds)
OUT_WORDS = 8
#: stages of the input converter and the square, from a lane's take to the window
CONVERTER_STAGES = 8
#: stages of the multiplier and the output converter, from the lookup's result
OUTPUT_STAGES = 6 + PRODUCT_STAGES
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


def _wrap(x):
    """``x`` as the cmodel's int64 holds it (two's complement, low 64 bits)."""
    return x.as_signed()[:WRAP_BITS].as_signed()


class LutLookup(wiring.Component):
    """NVDLA's int8 lookup (:func:`accel.cmod.lut.lookup_classes`) of one value a cycle,
    in :data:`LATENCY` pipeline stages that always advance, each at most one carry chain,
    one DSP multiplication or a few levels of logic (for 100 MHz on an ECP5).

    Both tables are evaluated: the LE table linear or exponential, the LO table linear;
    inside a table the two neighbouring entries are interpolated with a 16-bit fraction,
    outside it the first or last entry is extrapolated with the under/overflow slope.  The
    result is the table the priorities choose, saturated to int16.

    ``cfg`` must hold from :data:`SETTLE` cycles before the first value until the last is
    out: the values the stages use are worked out from it into registers first.

    Attributes
    ----------
    cfg : ``In(LutConfigLayout())``
    valid, x, tag : ``In``: a value to look up this cycle, and a tag carried beside it
    out_valid, out, out_tag : ``Out``: :data:`LATENCY` cycles later
    write_cfg, write_cfg_value : ``In``: ``S_LUT_ACCESS_CFG`` was written with this value
    write_data, write_data_value : ``In``: ``S_LUT_ACCESS_DATA`` likewise
    """

    LATENCY = 15
    SETTLE = 2

    def __init__(self, tag_bits: int, ecp5_dsp: bool | None = None) -> None:
        self.tag_bits, self.ecp5_dsp = tag_bits, ecp5_dsp
        super().__init__({
            "cfg": In(LutConfigLayout()),
            "valid": In(1), "x": In(signed(LUT_IN_BITS)), "tag": In(tag_bits),
            "out_valid": Out(1), "out": Out(signed(16)), "out_tag": Out(tag_bits),
            "write_cfg": In(1), "write_cfg_value": In(32),
            "write_data": In(1), "write_data_value": In(16),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        ecp5 = use_ecp5_dsp(self.ecp5_dsp, platform)
        cfg = self.cfg
        tables = {}
        for name, depth in (("le", LE_ENTRIES), ("lo", LO_ENTRIES)):
            mem = memory.Memory(shape=signed(16), depth=depth, init=[])
            m.submodules[f"{name}_table"] = mem
            tables[name] = (mem, depth, mem.write_port(), mem.read_port(), mem.read_port())
        self._access_port(m, tables)
        m.d.comb += [self.out_valid.eq(delayed(m, "valid", self.valid, self.LATENCY)),
                     self.out_tag.eq(delayed(m, "tag", self.tag, self.LATENCY))]

        # Stage numbers below count the registers after ``x``: "stage k" values are there
        # k cycles after it.  ---- stage 1: the value against each table's start and end
        x = self.x
        st = {n: self._settings(m, n, getattr(cfg, n), cfg) for n in tables}
        t, over_dx, under_dx = {}, {}, {}
        for n in tables:
            t[n] = stage(m, f"{n}_t", x - st[n]["start"], signed(40))
            over_dx[n] = stage(m, f"{n}_over_dx", x - st[n]["end"], signed(40))
            # (an exponential underflow extrapolates from start + 2**offset, in int64)
            under_dx[n] = stage(m, f"{n}_under_dx", _wrap(x - st[n]["under_start"]),
                               signed(WRAP_BITS))

        # ---- stages 2-3: each table's linear index and fraction (two-stage shifts) -------
        # the index is t >> select, or t << -select wrapped at 64 bits: (t << 32) >> amount
        flags = {}
        for n in tables:
            s = st[n]
            nonpos = stage(m, f"{n}_nonpos", t[n][-1] | (t[n] == 0))
            idx = shift_right_stages(m, f"{n}_lin_idx", Cat(Const(0, 32), t[n]).as_signed(),
                                      s["idx_amount"], WRAP_BITS).as_signed()
            frac = shift_right_stages(m, f"{n}_lin_frac",
                                       Cat(Const(0, 16), t[n] & s["frac_mask"]),
                                       s["frac_amount"], 16)
            nonpos3 = stage(m, f"{n}_nonpos3", nonpos)
            last_bits = (LE_ENTRIES if n == "le" else LO_ENTRIES).bit_length() - 1
            under = idx[-1] | nonpos3
            flags[n] = {"under": under, "over": ~under & idx[last_bits:-1].any(),
                        "idx": idx[:9], "frac": Mux(s["frac_zero"], 0, frac)}

        # ---- stages 2-5 for an exponential LE: the leading one, then the fraction --------
        # floor(log2 t) of a positive t below 2**39: the highest byte with a bit set, then
        # the highest bit in it
        tle = t["le"]
        byte_any = stage(m, "le_byte_any", Cat(*(tle[8 * b:8 * b + 8].any() for b in range(5))))
        byte_top = [stage(m, f"le_byte_top{b}", self._leading(tle[8 * b:8 * b + 8]), 3)
                    for b in range(5)]
        log = Signal(6, name="le_log_next")
        for b in range(5):
            with m.If(byte_any[b]):
                m.d.comb += log.eq(Cat(byte_top[b], Const(b, 3)))
        log3 = stage(m, "le_log", log)
        t3 = delayed(m, "le_t", tle, 2)
        exp_idx = stage(m, "le_exp_idx", log3 - cfg.le_offset, signed(10))
        # the fraction is t's bits below its leading one: ((t << 16) >> log)[:16]
        exp_frac = shift_right_stages(m, "le_exp_frac", Cat(Const(0, 16), t3), log3, 16)
        nonpos5 = delayed(m, "le_nonpos5", stage(m, "le_nonpos_e", tle[-1] | (tle == 0)), 3)
        exp_idx5 = stage(m, "le_exp_idx5", exp_idx)
        exp_under = exp_idx5[-1] | nonpos5
        exponential = st["le"]["exponential"]
        lin_le = {k: delayed(m, f"le_lin_{k}5", v, 2) for k, v in flags["le"].items()}
        flags["le"] = {
            "under": Mux(exponential, exp_under, lin_le["under"]),
            "over": Mux(exponential, ~exp_under & (exp_idx5 >= LE_ENTRIES - 1),
                        lin_le["over"]),
            "idx": Mux(exponential, exp_idx5[:9], lin_le["idx"]),
            "frac": Mux(exponential, exp_frac, lin_le["frac"])}
        flags["lo"] = {k: delayed(m, f"lo_lin_{k}5", v, 2) for k, v in flags["lo"].items()}

        # ---- stage 6: index, fraction and flow of each table; the entries' addresses -----
        per_table = {}
        for n, (_, depth, _, read0, read1) in tables.items():
            f, s, last = flags[n], st[n], depth - 1
            under, over = f["under"], f["over"]
            r = {"under": stage(m, f"{n}_under", under), "over": stage(m, f"{n}_over", over),
                 "frac": stage(m, f"{n}_frac", f["frac"], 16),
                 "dx": stage(m, f"{n}_dx", Mux(under, delayed(m, f"{n}_udx", under_dx[n], 4),
                                               delayed(m, f"{n}_odx", over_dx[n], 4)),
                            signed(WRAP_BITS)),
                 "scale": stage(m, f"{n}_scale", Mux(under, s["uflow_scale"], s["oflow_scale"])),
                 "amount": stage(m, f"{n}_amount",
                                Mux(under, s["uflow_amount"], s["oflow_amount"])),
                 "half_m1": stage(m, f"{n}_half_m1", Mux(under, s["uflow_half_m1"],
                                                         s["oflow_half_m1"]))}
            entry = stage(m, f"{n}_entry", Mux(under, 0, Mux(over, last, f["idx"])), 9)
            following = stage(m, f"{n}_following",
                             Mux(under, 1, Mux(over, last, f["idx"] + 1)), 9)
            # the entries read from the stage's registers arrive at stage 7
            m.d.comb += [read0.addr.eq(entry), read1.addr.eq(following)]
            per_table[n] = (r, read0, read1)

        # ---- stages 7-14: the interpolation and the extrapolation ------------------------
        values = {}
        for n, (r, read0, read1) in per_table.items():
            hit = ~r["under"] & ~r["over"]
            # interpolation: base + round((next - base) * frac / 2**16)
            # (the block RAMs' outputs, 5-6 ns after the clock, straight into registers)
            base = stage(m, f"{n}_base", read0.data)                             # stage 8
            upper = stage(m, f"{n}_upper", read1.data)
            diff = stage(m, f"{n}_diff", upper - base, signed(17))            # 9
            step = Signal(signed(DSP_PRODUCT_BITS), name=f"{n}_step")            # 11
            registered_multiply(m, f"{n}_step_mul", diff,
                                delayed(m, f"{n}_frac9", r["frac"], 3), step, ecp5)
            step_r = stage(m, f"{n}_step_rnd", step[:34].as_signed() + 0x7FFF
                           + ~step[33], signed(35))                                 # 12
            base12 = delayed(m, f"{n}_base12", base, 4)
            interp = stage(m, f"{n}_interp", base12 + (step_r >> 16), signed(19))    # 13
            # extrapolation: base + round(dx * scale / 2**shift), the product wrapped at
            # 64 bits like the cmodel's int64, in four 17-bit pieces of dx
            dx, scale = r["dx"], r["scale"]
            pieces = []
            for i in range(4):
                part = dx[17 * i:min(17 * (i + 1), WRAP_BITS)]
                part = part.as_signed() if i == 3 else part.as_unsigned()
                prod = Signal(signed(DSP_PRODUCT_BITS), name=f"{n}_slope{i}")    # stage 8
                registered_multiply(m, f"{n}_slope_mul{i}", part, scale, prod, ecp5)
                pieces.append(prod)
            low = stage(m, f"{n}_slope_low", pieces[0] + (pieces[1] << 17), signed(52))  # 9
            high = stage(m, f"{n}_slope_high", pieces[2] + (pieces[3] << 17), signed(48))
            slope = stage(m, f"{n}_slope", _wrap(low + (high << 34)), signed(WRAP_BITS))  # 10
            # round(slope / 2**shift) for shifts -16..15: (slope * 2**16) / 2**(shift + 16);
            # past 34 bits the result saturates whatever the shift
            amount10 = delayed(m, f"{n}_amount10", r["amount"], 4)
            half10 = delayed(m, f"{n}_half10", r["half_m1"], 4)
            big = stage(m, f"{n}_big", overflows(slope, 34))                          # 11
            negative = stage(m, f"{n}_negative", slope[-1])
            scaled = stage(m, f"{n}_scaled",
                          Cat(Const(0, 16), slope[:34]).as_signed() + half10
                          + round_carry(slope[-1], amount10 == 0), signed(52))
            amount11 = stage(m, f"{n}_amount11", amount10)
            shifted = stage(m, f"{n}_shifted", scaled >> amount11, signed(52))        # 12
            big12, negative12 = stage(m, f"{n}_big12", big), stage(m, f"{n}_negative12",
                                                                  negative)
            limited = stage(m, f"{n}_limited",                                           # 13
                           Mux(big12, Mux(negative12, -(1 << 17), (1 << 17) - 1),
                               saturate(shifted, 18)), signed(18))
            extrap = stage(m, f"{n}_extrap", delayed(m, f"{n}_base13", base, 5) + limited,
                          signed(19))                                                  # 14
            hit14 = delayed(m, f"{n}_hit14", hit, 8)
            values[n] = saturate(Mux(hit14, delayed(m, f"{n}_interp14", interp, 1), extrap),
                                 16)
        # ---- stage 15: the table the priorities choose ------------------------------------
        le, lo = per_table["le"][0], per_table["lo"][0]
        le_hit, lo_hit = ~le["under"] & ~le["over"], ~lo["under"] & ~lo["over"]
        uflow = le["under"] & lo["under"]
        oflow = ~uflow & le["over"] & lo["over"]
        only = ~uflow & ~oflow & (le_hit ^ lo_hit)
        hybrid = ~uflow & ~oflow & ~(le_hit ^ lo_hit)
        pick_lo = stage(m, "pick_lo", (uflow & cfg.uflow_lo) | (oflow & cfg.oflow_lo)
                       | (only & lo_hit) | (hybrid & cfg.hybrid_lo))                 # 7
        m.d.sync += self.out.eq(Mux(delayed(m, "pick_lo14", pick_lo, 7), values["lo"],
                                    values["le"]))
        return m

    @staticmethod
    def _leading(bits):
        """The position of the highest set bit of an 8-bit value (0 when none)."""
        out = Const(0, 3)
        for i in range(8):
            out = Mux(bits[i], i, out)
        return out

    def _settings(self, m: Module, n: str, table, cfg) -> dict:
        """The values table ``n``'s stages take from ``cfg``, in registers
        (:data:`SETTLE` cycles behind it)."""
        select = cfg.le_select if n == "le" else cfg.lo_select
        exponential = Signal(name=f"{n}_exponential")
        if n == "le":
            m.d.sync += exponential.eq(cfg.le_exponent)
        s = {"exponential": exponential}
        for name in ("start", "end"):
            s[name] = stage(m, f"{n}_{name}_s", getattr(table, name))
        # LE exponential: start + 2**offset for the underflow (offset mod 64, in int64)
        offset = cfg.le_offset
        adj = Signal(signed(WRAP_BITS), name=f"{n}_adj")
        if n == "le":
            m.d.sync += adj.eq(Mux(cfg.le_exponent & (offset >= 0),
                                   _wrap(Const(1, 65) << offset[:6]), 0))
        s["under_start"] = stage(m, f"{n}_under_start", _wrap(s["start"] + adj),
                                signed(WRAP_BITS))
        # the linear index: (t << 32) >> (32 + select), select -32..-1 or its low 5 bits
        # (bit 5 clear, the cmodel shifts by it mod 64)
        s["idx_amount"] = stage(m, f"{n}_idx_amount",
                               Mux(select < 0, 32 + select, 32 + select[:5]), 6)
        # the linear fraction: t mod 2**(select mod 32) rescaled to 16 bits, as
        # ((t mod ...) << 16) >> (select if select <= 16 else ((select - 16) mod 64) + 16)
        s["frac_mask"] = stage(m, f"{n}_frac_mask",
                              Cat(*(select[:5] > i for i in range(31))), 31)
        s["frac_amount"] = stage(m, f"{n}_frac_amount",
                                Mux(select > 16, (select - 16)[:6] + 16, select[:5]), 7)
        s["frac_zero"] = stage(m, f"{n}_frac_zero", select < 0)
        for flow in ("uflow", "oflow"):
            s[f"{flow}_scale"] = stage(m, f"{n}_{flow}_scale_s", getattr(table, f"{flow}_scale"))
            # a shift of -16..15 as a right shift of slope * 2**16 by 0..31
            amount = stage(m, f"{n}_{flow}_amount_s",
                          getattr(table, f"{flow}_shift").as_unsigned() ^ 0x10, 5)
            s[f"{flow}_amount"] = amount
            s[f"{flow}_half_m1"] = stage(m, f"{n}_{flow}_half_m1_s",
                                        half_minus_one(amount, 52), signed(52))
        return s

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
        # (its words' ready is the lane's decision: through a slice of the reader's)
        m.submodules.reader = reader = AxiReader(ADDR_BITS, atom, sliced_data=True)
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
        # (whether the word is its point's last surface, a register stepped with the
        # surfaces: the operation's registers through a subtraction into the lanes'
        # padding were 13.25 ns in the full engine, the count's comparison with a
        # register 10.47)
        surfaces = PassCount(m, "surfaces", cfg.surfaces, SIZE_BITS)
        last_surface = surfaces.last
        word_done = take & (lane == atom - 1)
        serialized = self._walk(m, "lanes", 0, 0, 0, word_done)
        with m.If(take):
            m.d.sync += lane.eq(lane + 1)
            with m.If(lane == atom - 1):
                m.d.sync += [lane.eq(0), surface.eq(Mux(last_surface, 0, surface + 1))]
                with m.If(last_surface):
                    surfaces.restart(m)
                with m.Else():
                    surfaces.next(m)
                with m.If(serialized["last"]):
                    m.d.sync += flush.eq(HALO)
        with m.Elif(flush != 0):
            m.d.sync += flush.eq(flush - 1)
        with m.If(self.start):
            m.d.sync += [lane.eq(0), surface.eq(0), flush.eq(0)]
            surfaces.first(m)
        x = word.word_select(lane, 8).as_signed()
        pad = last_surface & (lane >= cfg.last_lanes)

        # ---- the input converter and the square ------------------------------------------
        # stage 1 the offset; 3 the scale (one DSP block: 9 x 16 bits fit one, so not
        # product_stages' two pieces and their sum, a stage more); 4 the rounding term, 5 the
        # shift (shift_round_stages, of the product's 25 bits); 6 the saturation; 8 the
        # square (a DSP block)
        ecp5 = use_ecp5_dsp(None, platform)
        e0 = Signal(data.StructLayout({"lane": 1, "first": 1}))
        e0_x = Signal(signed(9))
        m.d.sync += [e0.lane.eq(take), e0.first.eq(take & (surface == 0) & (lane == 0)),
                     e0_x.eq(Mux(take & ~pad, x - cfg.in_offset, 0))]
        in_shift = ShiftSettings(m, "in", cfg.in_shift, 25)
        e_p = Signal(signed(DSP_PRODUCT_BITS))
        registered_multiply(m, "in_scale_mul", e0_x, cfg.in_scale, e_p, ecp5)
        e_shifted = shift_round_stages(m, "in", e_p[:25], in_shift, Const(0), 25)
        e_v = stage(m, "in_value", saturate(e_shifted, 9), signed(9))
        e_sq = Signal(signed(DSP_PRODUCT_BITS))
        registered_multiply(m, "square_mul", e_v, e_v, e_sq, ecp5)
        e3 = delayed(m, "in_flags", e0, CONVERTER_STAGES - 1)
        e3_v = delayed(m, "in_value8", e_v, 2)
        e3_sq = e_sq[:17]
        pushed = Signal()                      # a lane or a flush entered the window
        flushing = Signal()
        m.d.sync += [flushing.eq(~take & (flush != 0)), pushed.eq(0)]
        flush_arrives = delayed(m, "flush", flushing, CONVERTER_STAGES - 1)

        # ---- the window: nine lanes, the centre's neighbours squared ------------------------
        span = 2 * HALO + 1
        entry = data.StructLayout({"v": signed(9), "sq": 17, "lane": 1, "first": 1})
        win = [Signal(entry, name=f"win{i}") for i in range(span)]
        arrive = Signal(entry)
        m.d.comb += [arrive.v.eq(e3_v), arrive.sq.eq(e3_sq), arrive.lane.eq(e3.lane),
                     arrive.first.eq(e3.first | ~e3.lane)]   # (a flush starts no point)
        with m.If(e3.lane | flush_arrives):
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
        # the sum in three stages: pairs of neighbours, each side, then the three parts
        s0_valid, s0_v, s0_sq = Signal(), Signal(signed(9)), Signal(17)
        m.d.sync += [s0_valid.eq(pushed & centre.lane), s0_v.eq(centre.v), s0_sq.eq(centre.sq)]
        pairs = [stage(m, f"sq_pair{i}", terms[0] + terms[1], 18)
                 for i, terms in enumerate((ahead_terms[:2], ahead_terms[2:],
                                            behind_terms[:2], behind_terms[2:]))]
        s1_valid, s1_v = stage(m, "s1_valid", s0_valid), stage(m, "s1_v", s0_v)
        s1_sq = stage(m, "s1_sq", s0_sq)
        sides = stage(m, "sq_sides", (pairs[0] + pairs[1]) + (pairs[2] + pairs[3]), 20)
        p0_valid, p0_v = stage(m, "p0_valid", s1_valid), stage(m, "p0_v", s1_v)
        p0_x = Signal(signed(LUT_IN_BITS))
        m.d.sync += p0_x.eq(Mux(cfg.sqsum_bypass, s1_v, s1_sq + sides))
        m.submodules.lut = lut = LutLookup(tag_bits=9)
        m.d.comb += [lut.cfg.eq(cfg.lut), lut.valid.eq(p0_valid), lut.x.eq(p0_x),
                     lut.tag.eq(p0_v),
                     lut.write_cfg.eq(self.lut_cfg), lut.write_cfg_value.eq(self.lut_cfg_value),
                     lut.write_data.eq(self.lut_data),
                     lut.write_data_value.eq(self.lut_data_value)]
        # the multiplier (a DSP block, 2 stages); the output converter: 1 the offset, the
        # scale (product_stages: two DSP blocks and their sum), 1 the rounding term, 1 the
        # shift (shift_round_stages), 1 the saturation
        product = Signal(signed(DSP_PRODUCT_BITS))
        registered_multiply(m, "lut_mul", lut.out, lut.out_tag.as_signed(), product, ecp5)
        bypass_y = delayed(m, "lut_bypass", lut.out, 2)
        q_valid = delayed(m, "q_valid", lut.out_valid, 2)
        q_d = stage(m, "out_diff", Mux(cfg.mul_bypass, bypass_y, product[:25].as_signed())
                   - cfg.out_offset, signed(26))
        q_p = product_stages(m, "out_scale", q_d, cfg.out_scale, ecp5)
        out_shift = ShiftSettings(m, "out", cfg.out_shift, len(q_p))
        q_shifted = shift_round_stages(m, "out", q_p, out_shift, Const(0), len(q_p))
        p5_out = stage(m, "out_value", saturate(q_shifted, 8), signed(8))
        p5_valid = delayed(m, "out_valid", q_valid, OUTPUT_STAGES - 2)

        # ---- lanes packed into words, queued, written -------------------------------------
        packed, count = Signal(8 * atom), Signal(range(atom))
        # each word into the queue a cycle after its last lane, from registers (the last
        # lane's valid into the queue's write enables across the die: 10.5-11.4 ns in the
        # full engine); the credits count lanes, so the queue still never overflows
        word, word_valid = Signal(8 * atom, name="word"), Signal(name="word_valid")
        m.d.sync += [word.eq(Cat(packed[8:], p5_out.as_unsigned())),
                     word_valid.eq(p5_valid & (count == atom - 1))]
        m.d.comb += [words.w_data.eq(word), words.w_en.eq(word_valid)]
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
        the next on each ``step``; restarted by ``start``.  Counted up, no multiplier; the
        loops' ends are registers (:class:`~accel.rtl.timing.PassCount`: a count compared
        with the size less one, into the next address's choice, was the full engine's
        path at 58 MHz)."""
        atom, cfg = self.hw.atom_size, self.cfg
        addr, point, row = (Signal(ADDR_BITS, name=f"{name}_{n}")
                            for n in ("addr", "point", "row"))
        surfaces = PassCount(m, f"{name}_surfaces", cfg.surfaces, SIZE_BITS)
        columns = PassCount(m, f"{name}_columns", cfg.w, SIZE_BITS)
        lines = PassCount(m, f"{name}_lines", cfg.h, SIZE_BITS)
        with m.If(self.start):
            m.d.sync += [addr.eq(base), point.eq(base), row.eq(base)]
            for loop in (surfaces, columns, lines):
                loop.first(m)
        with m.Elif(step):
            surfaces.next(m)
            m.d.sync += addr.eq(addr + surf)
            with m.If(surfaces.last):
                surfaces.restart(m)
                columns.next(m)
                m.d.sync += [addr.eq(point + atom), point.eq(point + atom)]
                with m.If(columns.last):
                    columns.restart(m)
                    lines.next(m)
                    m.d.sync += [addr.eq(row + line), point.eq(row + line),
                                 row.eq(row + line)]
        return {"addr": addr, "last": surfaces.last & columns.last & lines.last}
