"""The CSB register file of the RTL engine, generated from NVDLA's register map.

For each implemented unit (default: the convolution pipeline and GLB) every
register of :mod:`accel.regs` exists at its CSB byte address, with NVDLA's
semantics, as the cmodel's :class:`accel.cmod.csb.UnitRegs` has them:

* ``S_`` registers once; ``D_`` registers twice (groups 0 and 1).  CSB
  writes and reads of ``D_`` registers reach the group ``S_POINTER.PRODUCER``
  selects; the datapath sees the ``CONSUMER`` group on ``<unit>_regs``.
* only the software-writable bits of a register change on a write (RDL
  ``sw = rw|w``); read-only bits keep their reset value here (``S_CBUF_FLUSH_STATUS``
  reads 1: the CBUF starts flushed, :data:`HW_STATUS`);
* ``<unit>_op_en`` is ``D_OP_ENABLE.OP_EN`` of the consumer group; a pulse on
  ``<unit>_done`` clears it, flips ``S_POINTER.CONSUMER`` and raises the
  unit's GLB interrupt status bit for that group (``CDMA`` raises
  ``CDMA_DAT`` and ``CDMA_WT``) unless ``S_INTR_MASK`` masks it;
* a unit with a lookup table (:data:`LUT_UNITS`) shows its ``S_`` registers on
  ``<unit>_singles`` (:func:`s_registers` order), and pulses ``<unit>_lut_cfg_write`` /
  ``<unit>_lut_data_write`` in the cycle a write of ``S_LUT_ACCESS_CFG`` /
  ``S_LUT_ACCESS_DATA`` has landed (the register holds the written value then);
* GLB ``S_INTR_STATUS`` clears the bits written 1, ``S_INTR_SET`` sets them,
  and ``irq`` is high while any status bit is.

The CSB port is a simple request/response bus: ``req`` (``valid``, byte
``addr``, ``write``, ``wdata``) is always ready and registered once per unit's
window, then once per 64 bytes of registers (:data:`PART_BITS`), then a write's
select once per register (:data:`WRITE_LATENCY`: a write changes its register at
the end of the third cycle after the one it is presented in, after a completion
pulsed with the request);
a read returns ``rdata`` with ``rvalid`` :data:`READ_LATENCY` cycles after the
request (the read data is then selected in :data:`READ_STAGES` registered
stages; in the board's form from a copy in block RAM of the registers only the
CSB writes, see :meth:`CsbRegisterFile._shadow`).  Requests take effect in
order.  A request to an address no implemented register has reads 0, changes
nothing and pulses ``error`` when a read would return (a read still gets its
``rvalid``), so a driver learns of it instead of hanging.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from accel.regs import UNITS, Register
from accel.rtl.timing import kept

#: the units of the convolution pipeline, GLB first
CONV_UNITS = ("NVDLA_GLB", "NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CMAC_A", "NVDLA_CMAC_B",
              "NVDLA_CACC", "NVDLA_SDP_RDMA", "NVDLA_SDP")

#: read-only status the hardware holds from reset: the CBUF starts flushed
HW_STATUS = {("NVDLA_CDMA", "S_CBUF_FLUSH_STATUS"): 1}

#: GLB interrupt sources a unit's completion raises (status field prefixes)
DONE_SOURCES = {"NVDLA_CDMA": ("CDMA_DAT_DONE", "CDMA_WT_DONE"), "NVDLA_CACC": ("CACC_DONE",),
                "NVDLA_SDP": ("SDP_DONE",), "NVDLA_PDP": ("PDP_DONE",), "NVDLA_CDP": ("CDP_DONE",)}


#: units whose lookup table the datapath fills from ``S_LUT_ACCESS_DATA`` writes
LUT_UNITS = ("NVDLA_CDP",)
#: the LUT access registers and the strobe each write pulses
LUT_STROBES = {"S_LUT_ACCESS_CFG": "lut_cfg_write", "S_LUT_ACCESS_DATA": "lut_data_write"}

#: a CSB request: byte address, write or read, write data (always accepted)
CSB_REQUEST = data.StructLayout({"valid": 1, "addr": 32, "write": 1, "wdata": 32})


#: cycles from a request to the end of the cycle in which a write changes its register:
#: the request's two copies (per window, per part), then the register's own select
WRITE_LATENCY = 3

#: registered stages of a read after the request's copies (see :class:`CsbRegisterFile`)
READ_STAGES = 4

#: cycles from a read request to its ``rvalid`` (and from any request to its ``error``):
#: the request's two copies, then the read's stages
READ_LATENCY = 2 + READ_STAGES

#: registers a read's second stage selects among in one place
READ_CHUNK = 8

#: each unit's registers lie in a window of 2**WINDOW_BITS bytes (4 KiB)
WINDOW_BITS = 12


#: each copy of the request serves the registers of 2**PART_BITS bytes (16 words) of a
#: window (the SDP window alone holds 120 32-bit registers)
PART_BITS = 6


def _part(addr: int) -> int:
    """The part of a window a register's byte address lies in (its copy of the request)."""
    return addr >> PART_BITS


def _window(addr: int) -> int:
    """The window (unit) of a register's byte address."""
    return addr >> WINDOW_BITS


def _word(addr: int) -> int:
    """The 32-bit word of a register's byte address within its part."""
    return (addr & ((1 << PART_BITS) - 1)) >> 2


def any_of(values) -> Value:
    """The bitwise OR of ``values`` (0 when there are none)."""
    result = Const(0, 1)
    for value in values:
        result = result | value
    return result


def port_name(unit: str) -> str:
    """``NVDLA_CMAC_A`` -> ``cmac_a``."""
    return unit.removeprefix("NVDLA_").lower()


def d_registers(unit: str) -> list[Register]:
    """The unit's ``D_`` registers in address order: the order of ``<unit>_regs``."""
    return sorted((r for r in UNITS[unit].registers.values() if r.name.startswith("D_")),
                  key=lambda r: r.address)


def s_registers(unit: str) -> list[Register]:
    """The unit's ``S_`` registers but status and pointer, in address order: the order of
    ``<unit>_singles``."""
    return sorted((r for r in UNITS[unit].registers.values()
                   if r.name.startswith("S_") and r.name not in ("S_STATUS", "S_POINTER")),
                  key=lambda r: r.address)


def write_mask(reg: Register) -> int:
    return sum(f.mask for f in reg.fields if "w" in f.access)


def _live(reg: Register, status_reg: Register) -> bool:
    """Whether the hardware changes the register too (a completion flips ``S_POINTER``'s
    consumer and clears ``D_OP_ENABLE``; GLB's ``S_INTR_STATUS`` holds the interrupts):
    the board's reads pick it from the register itself, not from the copy in block RAM."""
    return reg.name in ("S_POINTER", "D_OP_ENABLE") or reg is status_reg


class CsbRegisterFile(wiring.Component):
    """See the module docstring; ``units`` are names of :data:`accel.regs.UNITS`.

    ``per_register`` (the board's form) gives every register its own write select, read
    pick and copy of the consumer bit, registers that the FPGA build places beside it;
    without it (:meth:`_decoded`, for simulation tops) one decoder makes the same
    requests take the same cycles, and a simulator evaluates one branch of each decode a
    cycle instead of every register's select and pick (the ``engine_ram`` top on
    Verilator 1.27x faster, docs/rtl.md)."""

    def __init__(self, units: tuple[str, ...] = CONV_UNITS, per_register: bool = True) -> None:
        if "NVDLA_GLB" not in units:
            raise ValueError("the register file needs NVDLA_GLB (interrupt status and mask)")
        unknown = [u for u in units if u not in UNITS]
        if unknown:
            raise ValueError(f"units {', '.join(unknown)} not in the register map")
        self.units, self.per_register = units, per_register
        members = {
            "req": In(CSB_REQUEST),
            "rdata": Out(32), "rvalid": Out(1), "error": Out(1), "irq": Out(1),
        }
        for unit in units:
            regs = d_registers(unit)
            if not regs:
                continue
            members[f"{port_name(unit)}_regs"] = Out(data.ArrayLayout(unsigned(32), len(regs)))
            if "D_OP_ENABLE" in UNITS[unit].registers:
                members[f"{port_name(unit)}_op_en"] = Out(1)
                members[f"{port_name(unit)}_done"] = In(1)
            if unit in LUT_UNITS:
                members[f"{port_name(unit)}_singles"] = Out(
                    data.ArrayLayout(unsigned(32), len(s_registers(unit))))
                for strobe in LUT_STROBES.values():
                    members[f"{port_name(unit)}_{strobe}"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        glb = UNITS["NVDLA_GLB"].registers
        status_reg, mask_reg, set_reg = (glb["S_INTR_STATUS"], glb["S_INTR_MASK"],
                                         glb["S_INTR_SET"])
        status_bits = sum(f.mask for f in status_reg.fields)
        storage: dict[int, tuple[Register, Signal | tuple[Signal, Signal], Signal | None]] = {}
        pointers: dict[str, Signal] = {}
        for unit in self.units:
            pointer = None
            if "S_POINTER" in UNITS[unit].registers:
                preg = UNITS[unit].registers["S_POINTER"]
                pointer = Signal(32, init=preg.reset, name=f"{port_name(unit)}_pointer")
                pointers[unit] = pointer
            for reg in UNITS[unit].registers.values():
                name = f"{port_name(unit)}_{reg.name.lower()}"
                if reg.name == "S_POINTER":
                    storage[reg.address] = (reg, pointer, None)
                elif reg.name.startswith("D_"):
                    pair = (Signal(32, init=reg.reset, name=f"{name}_g0"),
                            Signal(32, init=reg.reset, name=f"{name}_g1"))
                    storage[reg.address] = (reg, pair, pointer)
                else:
                    init = HW_STATUS.get((unit, reg.name), reg.reset)
                    storage[reg.address] = (reg, Signal(32, init=init, name=name), None)
        status = storage[status_reg.address][1]
        mask = storage[mask_reg.address][1]

        def consumer(pointer: Signal | None):
            return pointer[16] if pointer is not None else 0

        # ---- CSB requests: writes, reads, unmapped addresses ----------------------------
        cleared = Signal(32)      # status bits a write of 1 clears this cycle
        setbits = Signal(32)      # ... and S_INTR_SET sets
        requests = self._per_register if self.per_register else self._decoded
        selected = requests(m, storage, status_reg=status_reg, set_reg=set_reg,
                            status_bits=status_bits, cleared=cleared, setbits=setbits)

        # ---- the datapath's view, op enables, completions -------------------------------
        raised = []               # status bits the completions of this cycle raise
        for unit in self.units:
            regs = d_registers(unit)
            if not regs:
                continue
            pointer = pointers.get(unit)
            view = getattr(self, f"{port_name(unit)}_regs")
            done = getattr(self, f"{port_name(unit)}_done", None)
            for i, reg in enumerate(regs):
                g0, g1 = storage[reg.address][1]
                if pointer is None:
                    m.d.comb += view[i].eq(g0)
                    continue
                if not self.per_register:
                    m.d.comb += view[i].eq(Mux(pointer[16], g1, g0))
                    continue
                # the consumer bit, copied per register (``keep``): the pointer's own bit
                # selecting every register of the unit was among the build's most congested
                # nets.  Each copy takes the bit's next value, so it always equals the bit
                # (only a completion flips it; the field is read-only)
                here = kept(f"{port_name(unit)}_consumer_{i}",
                            init=(UNITS[unit].registers["S_POINTER"].reset >> 16) & 1)
                flip = done if done is not None else Const(0)
                m.d.sync += here.eq(pointer[16] ^ flip)
                m.d.comb += view[i].eq(Mux(here, g1, g0))
            if "D_OP_ENABLE" not in UNITS[unit].registers:
                continue
            g0, g1 = storage[UNITS[unit].registers["D_OP_ENABLE"].address][1]
            done = getattr(self, f"{port_name(unit)}_done")
            op_en = getattr(self, f"{port_name(unit)}_op_en")
            if pointer is None:
                m.d.comb += op_en.eq(g0[0])
                with m.If(done):
                    m.d.sync += g0[0].eq(0)
                continue
            m.d.comb += op_en.eq(Mux(pointer[16], g1[0], g0[0]))
            with m.If(done):
                with m.If(pointer[16]):
                    m.d.sync += g1[0].eq(0)
                with m.Else():
                    m.d.sync += g0[0].eq(0)
                m.d.sync += pointer[16].eq(~pointer[16])
            for source in DONE_SOURCES.get(unit, ()):
                for group in (0, 1):
                    bit = status_reg.field(f"{source}_STATUS{group}").mask
                    raised.append(Mux(done & (consumer(pointer) == group), bit, 0))

        # ---- lookup tables: the S_ registers and the access strobes -----------------------
        for unit in self.units:
            if unit not in LUT_UNITS:
                continue
            view = getattr(self, f"{port_name(unit)}_singles")
            for i, reg in enumerate(s_registers(unit)):
                m.d.comb += view[i].eq(storage[reg.address][1])
            for reg_name, strobe in LUT_STROBES.items():
                address = UNITS[unit].registers[reg_name].address
                m.d.sync += getattr(self, f"{port_name(unit)}_{strobe}").eq(selected(address))

        # ---- GLB interrupt status and the pin -------------------------------------------
        raise_bits = Const(0, 32)
        for term in raised:
            raise_bits = raise_bits | term
        m.d.sync += status.eq((status & ~cleared) | setbits | (raise_bits & ~mask))
        m.d.comb += self.irq.eq(status != 0)
        return m

    def _per_register(self, m: Module, storage: dict, *, status_reg: Register,
                      set_reg: Register, status_bits: int, cleared: Signal,
                      setbits: Signal) -> Callable[[int], Value]:
        """The board's requests (``per_register``); returns a register's write select
        (a cycle before the write lands) by its address."""
        # ---- CSB requests ---------------------------------------------------------------
        # The request is registered once per part of a unit's window (the copies marked
        # ``keep``, so each can sit beside its registers): from a single register the write
        # data and the address fanned out to every register of the file, the most
        # congested nets of the board build after its reset, and one copy per window still
        # left the SDP window's among the most congested.  Each copy holds whether the
        # request is for its part (valid, word-aligned, the part's 64 bytes), the word
        # within the part, write and the data; a register's select is its part's valid and
        # a compare of the word.  The parts' copies are taken from a copy per window
        # (:meth:`_staged`): the request's one register into all of them, a 13-ns net
        # across the die, was the full engine's path at 74 MHz.
        parts = sorted({_part(a) for a in storage})
        windows: dict[int, data.View] = {}
        mine, word, writing, wdata = {}, {}, {}, {}
        for part in parts:
            base = part >> (WINDOW_BITS - PART_BITS)
            if base not in windows:
                windows[base] = self._staged(m, f"csb_req_window_{base:x}")
            req = windows[base]
            aligned = req.addr[:2] == 0
            mine[part] = kept(f"csb_req_{part:x}_valid")
            word[part] = kept(f"csb_req_{part:x}_word", PART_BITS - 2)
            writing[part] = kept(f"csb_req_{part:x}_write")
            wdata[part] = kept(f"csb_req_{part:x}_wdata", 32)
            m.d.sync += [
                mine[part].eq(req.valid & aligned & (req.addr[PART_BITS:] == part)),
                word[part].eq(req.addr[2:PART_BITS]), writing[part].eq(req.write),
                wdata[part].eq(req.wdata)]

        # A write takes effect a cycle after the request's copy: each register's select is
        # a register of its own (``keep``, beside the register it enables), with the
        # part's data a cycle later, not the copy's valid into every register's enable
        # across the die.
        wdata_late = {}
        for part in parts:
            wdata_late[part] = kept(f"csb_req_{part:x}_wdata_late", 32)
            m.d.sync += wdata_late[part].eq(wdata[part])

        def write(target: Signal, wmask: int, part: int):
            return target.eq((target & ~wmask) | (wdata_late[part] & wmask))

        # what a read may return from the registers themselves (those the hardware
        # changes too, :func:`_live`): (register, the read selects it) per window; whether
        # the request names a register of a part
        bases = sorted({_window(a) for a in storage})
        readable: dict[int, list[tuple[Signal, Value]]] = {base: [] for base in bases}
        named: dict[int, list[Value]] = {part: [] for part in parts}
        selects: dict[int, Signal] = {}           # each register's write select
        for addr, (reg, store, pointer) in storage.items():
            base, part = _window(addr), _part(addr)
            here = word[part] == _word(addr)
            named[part].append(here)
            sel = kept(f"csb_select_{addr:x}")
            selects[addr] = sel
            m.d.sync += sel.eq(mine[part] & writing[part] & here)
            asked = mine[part] & ~writing[part] & here
            wmask = write_mask(reg)
            live = _live(reg, status_reg)
            if isinstance(store, tuple):                  # a D_ register: two groups
                g0, g1 = store
                if pointer is None:
                    if live:
                        readable[base].append((g0, asked))
                    with m.If(sel):
                        m.d.sync += write(g0, wmask, part)
                else:
                    if live:
                        readable[base] += [(g0, asked & ~pointer[0]),
                                           (g1, asked & pointer[0])]
                    with m.If(sel & ~pointer[0]):
                        m.d.sync += write(g0, wmask, part)
                    with m.If(sel & pointer[0]):
                        m.d.sync += write(g1, wmask, part)
            else:
                if live:
                    readable[base].append((store, asked))
                with m.If(sel):
                    if reg is status_reg:
                        m.d.comb += cleared.eq(wdata_late[part] & status_bits)
                    elif reg is set_reg:
                        m.d.comb += setbits.eq(wdata_late[part] & status_bits)
                    elif wmask:
                        m.d.sync += write(store, wmask, part)

        # Reads of the live registers, after the request's copy, in READ_STAGES registered
        # stages of a few gates each (the registers of a unit lie wherever their datapath
        # is, so every stage also crosses the die): a one-hot select per register; the
        # selected register of each chunk of READ_CHUNK; of each window; of all windows.
        # Every other register is read from its copy in block RAM (:meth:`_shadow`).
        chosen = {base: [] for base in bases}
        for base, entries in readable.items():
            for i, (value, asked) in enumerate(entries):
                picked = Signal(name=f"csb_pick_{base:x}_{i}")
                m.d.sync += picked.eq(asked)
                chosen[base].append((value, picked))
        window_data = []
        for base, entries in chosen.items():
            chunks = []
            for i in range(0, len(entries), READ_CHUNK):
                chunk = Signal(32, name=f"csb_chunk_{base:x}_{i // READ_CHUNK}")
                m.d.sync += chunk.eq(any_of(Mux(picked, value, 0)
                                         for value, picked in entries[i:i + READ_CHUNK]))
                chunks.append(chunk)
            window = Signal(32, name=f"csb_window_{base:x}")
            m.d.sync += window.eq(any_of(chunks))
            window_data.append(window)
        shadow_value, from_live = self._shadow(m, storage, status_reg, set_reg)
        m.d.sync += self.rdata.eq(Mux(from_live, any_of(window_data), shadow_value))
        hit = Signal(name="csb_hit")
        m.d.sync += hit.eq(any_of(mine[part] & any_of(named[part]) for part in parts))
        self._read_flags(m, hit)
        return selects.__getitem__

    def _shadow(self, m: Module, storage: dict, status_reg: Register,
                set_reg: Register) -> tuple[Signal, Signal]:
        """A copy in block RAM of every register only the CSB writes, for the board's reads:
        the value a read returns from it in the cycle the read's data is chosen, and
        whether the read is of a live register instead (:func:`_live`).

        Each register has a slot (its window and word; a ``D_`` register of a unit with a
        pointer one per group), which holds its reset value from the start.  A write lands
        in the slot in the cycle it lands in the register, merged as the register merges
        it (its read-only bits keep their reset value), in the group the producer's pointer
        names then; a read reads the group the pointer named when the read's copy was
        taken, as the registers' own picks did.  The masks, reset values and flags of the
        slots come from a table in block RAM too, their flags from a decode of the slot
        into registers beside the table's read (the table's output, 5.6 ns after the
        clock, into the shadow's addresses was 11.7 ns in the full engine).  (The read
        multiplexer of every register of the file, ~5,500 LUT4 for ~400 registers
        gathered from all over the die, was the largest part of the file and among the
        most congested nets of the full engine's build.)"""
        req = self._staged(m, "csb_req_shadow")
        offsets = [(a & ((1 << WINDOW_BITS) - 1)) >> 2 for a in storage]
        word_bits = max(offsets).bit_length()
        window_bits = max(_window(a) for a in storage).bit_length()
        slot_bits = word_bits + window_bits

        def slot(addr: int) -> int:
            return (_window(addr) << word_bits) | ((addr & ((1 << WINDOW_BITS) - 1)) >> 2)

        # the table: mask (32), reset value (32); the slots of each flag
        table = [0] * (1 << slot_bits)
        contents = [0] * (2 << slot_bits)           # group 1's slots after group 0's
        producers: dict[int, Signal] = {}         # window -> its unit's producer bit
        slots: dict[str, list[int]] = {"grouped": [], "live": [], "mapped": [], "written": []}
        for addr, (reg, store, pointer) in storage.items():
            grouped = isinstance(store, tuple) and pointer is not None
            if grouped:
                producers[_window(addr)] = pointer[0]
            first = store[0] if isinstance(store, tuple) else store
            mask = 0 if reg in (status_reg, set_reg) else write_mask(reg)
            table[slot(addr)] = mask | (first.init << 32)
            for name, has in (("grouped", grouped), ("live", _live(reg, status_reg)),
                              ("mapped", True), ("written", mask != 0)):
                if has:
                    slots[name].append(slot(addr))
            contents[slot(addr)] = first.init
            if grouped:
                contents[(1 << slot_bits) | slot(addr)] = first.init
        m.submodules.csb_table = rom = Memory(shape=unsigned(64), depth=len(table), init=table)
        m.submodules.csb_shadow = shadow = Memory(shape=unsigned(32), depth=len(contents),
                                                 init=contents)
        # the request's copy for the table (its slot, whether it is in the table's range)
        in_range = (req.addr[:2] == 0) & (req.addr[2 + word_bits:WINDOW_BITS] == 0) \
            & (req.addr[WINDOW_BITS + window_bits:] == 0)
        at = Signal(slot_bits, name="csb_shadow_slot")
        ok, writing = Signal(name="csb_shadow_valid"), Signal(name="csb_shadow_write")
        wdata = Signal(32, name="csb_shadow_wdata")
        m.d.sync += [at.eq(Cat(req.addr[2:2 + word_bits],
                               req.addr[WINDOW_BITS:WINDOW_BITS + window_bits])),
                     ok.eq(req.valid & in_range), writing.eq(req.write), wdata.eq(req.wdata)]
        entry = rom.read_port()
        m.d.comb += entry.addr.eq(at)
        mask, reset = entry.data[:32], entry.data[32:64]
        flag = {name: Signal(name=f"csb_shadow_{name}") for name in slots}
        for name, members in slots.items():
            if not members:                       # (a flag no slot has stays 0)
                continue
            with m.Switch(at):
                with m.Case(*members):
                    m.d.sync += flag[name].eq(1)
                with m.Default():
                    m.d.sync += flag[name].eq(0)
        grouped, live, mapped = flag["grouped"], flag["live"], flag["mapped"]
        # a cycle later: the table's entry, the producer bit now (a write's) and as the
        # copy was taken (a read's)
        window_now = Signal(window_bits)
        producer = Array(producers.get(w, Const(0)) for w in range(1 << window_bits))
        at_late, ok_late = Signal.like(at), Signal()
        writing_late, wdata_late = Signal(), Signal(32)
        read_group = Signal()
        m.d.sync += [at_late.eq(at), ok_late.eq(ok), writing_late.eq(writing),
                     wdata_late.eq(wdata), read_group.eq(producer[at[word_bits:]])]
        m.d.comb += window_now.eq(at_late[word_bits:])
        write_port = shadow.write_port()
        m.d.comb += [write_port.addr.eq(Cat(at_late, grouped & producer[window_now])),
                     write_port.data.eq((reset & ~mask) | (wdata_late & mask)),
                     write_port.en.eq(ok_late & writing_late & flag["written"])]
        read_port = shadow.read_port()
        m.d.comb += read_port.addr.eq(Cat(at_late, grouped & read_group))
        # the slot's value and the flags, registered for the read's last stage
        value = Signal(32, name="csb_shadow_value")
        from_live = Signal(name="csb_read_live")
        flags = Signal(2)
        m.d.sync += [flags.eq(Cat(live & mapped & ok_late, mapped & ok_late)),
                     value.eq(Mux(flags[1], read_port.data, 0)), from_live.eq(flags[0])]
        return value, from_live

    def _decoded(self, m: Module, storage: dict, *, status_reg: Register, set_reg: Register,
                 status_bits: int, cleared: Signal, setbits: Signal) -> Callable[[int], Value]:
        """The board's requests with the board's cycles through one decoder: the request's
        copy; the index of the register it names (a write's a cycle later, where the board
        has each register's select); a read's pick (the index and, for a ``D_``
        register, the producer's group then) and the picked value a cycle later; then the
        board's window and output stages as plain delays.  Each decode is under a check
        that a request is there, so an idle cycle takes none of its branches."""
        req = self._staged(m, "csb_req_staged")
        entries = sorted(storage.items())
        index_bits = (len(entries) + 1).bit_length()
        # the request's copy (the board's copies per part of a window)
        addr = Signal(32, name="csb_req_addr")
        valid, writing = Signal(name="csb_req_valid"), Signal(name="csb_req_write")
        wdata, wdata_late = Signal(32, name="csb_req_wdata"), Signal(32, name="csb_wdata_late")
        m.d.sync += [addr.eq(req.addr), valid.eq(req.valid & (req.addr[:2] == 0)),
                     writing.eq(req.write), wdata.eq(req.wdata), wdata_late.eq(wdata)]
        named = Signal(index_bits, name="csb_named")     # the register's index + 1; 0: none
        with m.If(valid), m.Switch(addr):
            for i, (address, _) in enumerate(entries):
                with m.Case(address):
                    m.d.comb += named.eq(i + 1)
        written = Signal(index_bits, name="csb_written")  # the board's selects, as an index
        m.d.sync += written.eq(Mux(valid & writing, named, 0))
        index = {address: i + 1 for i, (address, _) in enumerate(entries)}

        def write(target: Signal, wmask: int):
            return target.eq((target & ~wmask) | (wdata_late & wmask))

        with m.If(written != 0), m.Switch(written):
            for i, (_, (reg, store, pointer)) in enumerate(entries):
                with m.Case(i + 1):
                    wmask = write_mask(reg)
                    if isinstance(store, tuple):              # a D_ register: two groups
                        if pointer is None:
                            m.d.sync += write(store[0], wmask)
                        else:
                            with m.If(pointer[0]):
                                m.d.sync += write(store[1], wmask)
                            with m.Else():
                                m.d.sync += write(store[0], wmask)
                    elif reg is status_reg:
                        m.d.comb += cleared.eq(wdata_late & status_bits)
                    elif reg is set_reg:
                        m.d.comb += setbits.eq(wdata_late & status_bits)
                    elif wmask:
                        m.d.sync += write(store, wmask)
        # reads: pick 2 i + 1 is entry i (a D_ register's group 0), 2 i + 2 its group 1
        pick = Signal((2 * len(entries) + 1).bit_length(), name="csb_pick")
        m.d.sync += pick.eq(0)
        with m.If(valid & ~writing), m.Switch(addr):
            for i, (address, (_, store, pointer)) in enumerate(entries):
                with m.Case(address):
                    if isinstance(store, tuple) and pointer is not None:
                        m.d.sync += pick.eq(2 * i + 1 + pointer[0])
                    else:
                        m.d.sync += pick.eq(2 * i + 1)
        value, window = Signal(32, name="csb_value"), Signal(32, name="csb_window")
        m.d.sync += value.eq(0)
        with m.If(pick != 0), m.Switch(pick):
            for i, (_, (_, store, _)) in enumerate(entries):
                with m.Case(2 * i + 1):
                    m.d.sync += value.eq(store[0] if isinstance(store, tuple) else store)
                if isinstance(store, tuple):
                    with m.Case(2 * i + 2):
                        m.d.sync += value.eq(store[1])
        m.d.sync += [window.eq(value), self.rdata.eq(window)]
        hit = Signal(name="csb_hit")
        m.d.sync += hit.eq(valid & (named != 0))
        self._read_flags(m, hit)
        return lambda address: written == index[address]

    def _staged(self, m: Module, name: str) -> data.View:
        """The request a cycle late, in a kept register ``name`` of its own: the first of
        the request's two registered stages, one for each group of its users (each window
        of the board's registers, the shadow's table), so that no one register of it
        reaches across the die to all of them (the read flags, two bits, are a chain of
        :data:`READ_LATENCY` registers from the request itself)."""
        staged = Signal(CSB_REQUEST, name=name, attrs={"keep": 1})      # (a kept register)
        m.d.sync += staged.eq(self.req)
        return staged

    def _read_flags(self, m: Module, hit: Signal) -> None:
        """``rvalid`` and ``error``: the request's read and valid flags follow it for
        :data:`READ_LATENCY` cycles, whether it named a register (``hit``, known after
        the request's copies) for the rest."""
        req = self.req
        read = [Signal(name=f"csb_read_{i}") for i in range(READ_LATENCY - 1)]
        valid = [Signal(name=f"csb_valid_{i}") for i in range(READ_LATENCY - 1)]
        m.d.sync += [read[0].eq(req.valid & ~req.write), valid[0].eq(req.valid)]
        m.d.sync += [read[i].eq(read[i - 1]) for i in range(1, READ_LATENCY - 1)]
        m.d.sync += [valid[i].eq(valid[i - 1]) for i in range(1, READ_LATENCY - 1)]
        hits = [hit] + [Signal(name=f"csb_hit_{i}") for i in range(1, READ_STAGES - 1)]
        m.d.sync += [hits[i].eq(hits[i - 1]) for i in range(1, READ_STAGES - 1)]
        m.d.sync += [self.rvalid.eq(read[-1]), self.error.eq(valid[-1] & ~hits[-1])]
