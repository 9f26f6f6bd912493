"""NVIDIA's direct-convolution traces on the RTL engine (``accel/rtl/conv_engine.py``).

Traces arrive on request (``serve``: a JSON line per trace on the pipe named by
``OPENDLA_TRACE_REQUESTS``, from :class:`accel.trace.rtl_player.RtlSimulator`),
and each is played as the cmodel's trace player plays it
(:mod:`accel.trace`: the same parser, memory files and golden CRCs), with
the engine on the CSB and its AXI4 port served by
``cocotbext-axi``'s AXI slave over the trace's memory image: every
``reg_write`` goes to the engine's CSB port, ``poll_reg_equal`` reads it,
``intr_notify`` waits for the engine's interrupt pin and acknowledges the
status bit, and ``check_crc`` compares the destination memory with the
golden CRC.  The engine fetches the input cube, weights and operands and
writes the output itself; the testbench only serves the bus.

With ``OPENDLA_RTL_MEMORY=ram`` (the ``engine_ram`` top) the memory is the
board's block RAM inside the design instead (:class:`RamTarget`): the
testbench loads the trace's memory image through the RAM's port before the
engine runs and reads results back before each check, and the engine's bus
traffic never leaves the simulator.

Before anything runs, what the engine does not implement is an error naming
the register: registers of other units, SDP_RDMA per-element operands or its
element-wise (EW) DMA, SDP reading its input from memory, addresses above
4 GiB or off the memory atom.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import cocotb
import numpy as np
from cocotb.triggers import First, NextTimeStep, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time
from conv_tb import reset
from engine_tb import attach_memory, csb_read, csb_write

from accel.cmod.dram import Dram
from accel.cmod.glb import status_bit
from accel.config import HwConfig
from accel.regs import lookup
from accel.trace.cmod_player import CmodPlayer
from accel.trace.rtl_player import refusal
from accel.trace.script import TraceError, find_cfg, parse_cfg, parse_int

CLOCK_NS = 10
#: cycles an interrupt or a poll may take before the trace is declared hung
BUDGET = int(os.environ.get("OPENDLA_TRACE_BUDGET", "2000000"))


class DramTarget:
    """The trace's memory image as the AXI slave's target; an access outside the image is
    answered SLVERR (by cocotbext-axi) and remembered in ``faults``."""

    def __init__(self, dram: Dram) -> None:
        self.dram = dram
        self.faults: list[str] = []

    async def read(self, address: int, length: int) -> bytes:
        try:
            return self.dram.read(address, length).tobytes()
        except Exception as exc:
            self.faults.append(f"read of {length} bytes at {address:#x}: {exc}")
            raise

    async def write(self, address: int, data: bytes) -> None:
        try:
            self.dram.write(address, np.frombuffer(bytes(data), np.uint8), "AXI")
        except Exception as exc:
            self.faults.append(f"write of {len(data)} bytes at {address:#x}: {exc}")
            raise


class RamTarget:
    """The trace's memory image in the engine's block RAM (``engine_ram`` top): each
    mapped region gets an address window (see :class:`accel.rtl.uart.RamEngine`) onto its
    own part of the RAM.  :meth:`load` writes the regions the trace set up since the last
    load, :meth:`fetch` reads regions back."""

    def __init__(self, dut, hw: HwConfig, ram_bytes: int) -> None:
        self.dut, self.nb, self.ram_bytes = dut, hw.atom_size, ram_bytes
        self.windows = len(dut.map_base) // 32
        self.dram = Dram()
        self.faults: list[str] = []       # an address outside every window is not caught
        self.loaded: dict[int, int] = {}  # region base -> image version the RAM holds
        self.place: dict[int, int] = {}   # region base -> its first byte in the RAM
        self.blank = True                 # the RAM still holds its initial zeros

    async def _access(self, index: int, wdata: int = 0, strb: int = 0,
                      write: bool = False) -> int:
        """One word through the RAM's port: written where ``strb``, or read."""
        dut = self.dut
        dut.mem_addr.value, dut.mem_wdata.value, dut.mem_strb.value = index, wdata, strb
        dut.mem_write.value, dut.mem_valid.value = int(write), 1
        for _ in range(BUDGET):
            await RisingEdge(dut.clk)
            await ReadOnly()
            if dut.mem_done.value == 1:      # the request is done, its data here
                data = int(dut.mem_rdata.value)
                await NextTimeStep()
                dut.mem_valid.value = 0
                return data
        raise TraceError(f"the RAM port was not granted within {BUDGET} cycles")

    def _ram_address(self, addr: int) -> int:
        for base, size, _ in self.dram.regions:
            if base <= addr < base + size:
                return addr - base + self.place[base]
        raise TraceError(f"address {addr:#x} is in no mapped region")

    def _map(self) -> None:
        """Give every region a window: side by side in the RAM, each on a word boundary at
        the same offset within its word as in the trace's address space."""
        regions = self.dram.regions
        if [b for b, _, _ in regions] == list(self.place):
            return
        if len(regions) > self.windows:
            raise TraceError(f"the trace maps {len(regions)} memory regions; the RAM top has "
                             f"{self.windows} address windows")
        nb, at, fields = self.nb, 0, {"base": 0, "size": 0, "offset": 0}
        self.place.clear()
        for i, (base, size, _) in enumerate(regions):
            at += base % nb
            if at + size > self.ram_bytes:
                raise TraceError(f"the trace's memory regions need more than the RAM's "
                                 f"{self.ram_bytes >> 10} KiB")
            self.place[base] = at
            for k, v in (("base", base), ("size", size), ("offset", at)):
                fields[k] |= v << (32 * i)
            at = -(-(at + size) // nb) * nb
        for k, v in fields.items():
            getattr(self.dut, f"map_{k}").value = v
        self.loaded.clear()

    async def load(self) -> None:
        """Write every region whose image changed since it was loaded (the whole region; on
        a blank RAM, only its non-zero words)."""
        self._map()
        nb = self.nb
        for base, size, _ in self.dram.regions:
            version = self.dram.version(base)
            if self.loaded.get(base) == version:
                continue
            first = base - base % nb
            words = -(-(base + size - first) // nb)
            image = np.zeros(words * nb, np.uint8)
            image[base - first:base - first + size] = self.dram.read(base, size)
            strbs = np.zeros(words * nb, np.uint8)
            strbs[base - first:base - first + size] = 1
            start = self.place[base] - base % nb
            for w in range(words):
                chunk, on = image[w * nb:(w + 1) * nb], strbs[w * nb:(w + 1) * nb]
                if self.blank and not chunk.any():
                    continue
                strb = int(sum(int(b) << i for i, b in enumerate(on)))
                index = (start + w * nb) // nb
                await self._access(index, int.from_bytes(chunk.tobytes(), "little"), strb,
                                   write=True)
            self.loaded[base] = version
        self.blank = False

    async def fetch(self, base: int, size: int) -> None:
        """Read ``[base, base + size)`` back from the RAM into the image."""
        nb = self.nb
        first = base - base % nb
        words = -(-(base + size - first) // nb)
        raw = bytearray()
        start = self._ram_address(base) - base % nb
        for w in range(words):
            index = (start + w * nb) // nb
            raw += (await self._access(index)).to_bytes(nb, "little")
        self.dram.write(base, raw[base - first:base - first + size], "RAM")
        region = next(b for b, s, _ in self.dram.regions if b <= base < b + s)
        self.loaded[region] = self.dram.version(region)   # image and RAM agree again


async def wait_status(dut, bit: int, where: str, source: str) -> None:
    """Until ``bit`` of ``S_INTR_STATUS`` is set, watching the interrupt pin."""
    waited = 0
    while True:
        if dut.irq.value != 1:
            t0 = get_sim_time("ns")
            edge = await First(RisingEdge(dut.irq), Timer((BUDGET - waited) * CLOCK_NS, "ns"))
            waited += int((get_sim_time("ns") - t0) / CLOCK_NS)
            if not isinstance(edge, RisingEdge):
                raise TraceError(f"{where}: interrupt {source} not raised within {BUDGET} "
                                 f"cycles")
        if await csb_read(dut, "NVDLA_GLB.S_INTR_STATUS") & bit:
            return
        waited += 2
        if waited >= BUDGET:
            raise TraceError(f"{where}: interrupt {source} not raised within {BUDGET} cycles")


async def play(dut, trace: Path, hw: HwConfig, target: DramTarget) -> dict:
    """Play the trace in directory ``trace`` on the engine; its memory image becomes
    ``target``'s.  Returns the CRC checks, cycles, the cycles and seconds spent waiting
    for interrupts (the engine running) and the memory image."""
    cfg_path = find_cfg(trace)
    cmds = parse_cfg(cfg_path)
    why = refusal(cfg_path, cmds, hw)  # what the engine lacks: an error, before anything runs
    if why:
        raise TraceError(why)
    dram = target.dram = Dram()
    target.faults.clear()
    ram = target if isinstance(target, RamTarget) else None
    if ram is not None:           # this trace's regions get windows of their own
        ram.loaded.clear()
        ram.place.clear()
    loader = CmodPlayer(cfg_path, SimpleNamespace(dram=dram))
    notified, checks = set(), 0
    waited = {"cycles": 0, "seconds": 0.0}     # in interrupt waits: the engine running
    start = get_sim_time("ns")
    for cmd in cmds:
        where = f"{cfg_path.name}:{cmd.line}"
        if cmd.name in ("mem_init", "mem_load"):
            getattr(loader, f"do_{cmd.name}")(cmd)
        elif cmd.name == "reg_write":
            if ram is not None:
                await ram.load()
            await csb_write(dut, lookup(cmd.args[0]).symbol, parse_int(cmd.args[1]))
        elif cmd.name in ("reg_read", "poll_reg_equal"):
            want = parse_int(cmd.args[1])
            for _ in range(BUDGET if cmd.name == "poll_reg_equal" else 1):
                value = await csb_read(dut, lookup(cmd.args[0]).symbol)
                if value == want:
                    break
            else:
                raise TraceError(f"{where}: {cmd.args[0]} reads {value:#x}, expected {want:#x}")
        elif cmd.name == "intr_notify":
            source, _, group = cmd.args[0].rpartition("_")
            bit = status_bit(source, int(group))
            t0, wall0 = get_sim_time("ns"), time.perf_counter()
            await wait_status(dut, bit, where, cmd.args[0])
            waited["cycles"] += int((get_sim_time("ns") - t0) / CLOCK_NS)
            waited["seconds"] += time.perf_counter() - wall0
            assert dut.bus_error.value == 0, (f"{where}: an AXI response was not OKAY: "
                                              f"{'; '.join(target.faults[:3])}")
            await csb_write(dut, "NVDLA_GLB.S_INTR_STATUS", bit)
            notified.add(cmd.args[1])
        elif cmd.name == "check_crc":
            sync = cmd.args[0]
            base, size, golden = (parse_int(a) for a in cmd.args[2:5])
            assert sync in notified, f"{where}: check_crc before {sync} was notified"
            if ram is not None:
                await ram.fetch(base, size)
            region = dram.read(base, size)
            crc = zlib.crc32(region.tobytes()) & 0xFFFFFFFF
            assert crc == golden, f"{where}: CRC {crc:#010x}, golden {golden:#010x}"
            checks += 1
        elif cmd.name not in ("check_nothing", "sync_notify", "sync_wait"):
            raise TraceError(f"{where}: trace command {cmd.name} is not supported on the RTL")
    return {"crc_checks": checks, "trace_cycles": int((get_sim_time("ns") - start) / CLOCK_NS),
            "wait_cycles": waited["cycles"], "wait_seconds": waited["seconds"], "dram": dram}


async def serve(dut, hw: HwConfig, target: DramTarget, requests: str, replies: str,
                inputs: tuple[str, ...]) -> dict:
    """Play traces on request, one engine for all: a JSON line per request on the
    ``requests`` pipe (``{"trace": DIR, "reset": BOOL, "dumps": [[ADDR, SIZE, FILE],
    ...]}``, or ``{"quit": true}``), a JSON line per reply on ``replies`` (``ok``,
    ``cycles``, ``seconds``, ``trace_cycles``, ``crc_checks``, or ``reason``).  ``reset``
    resets the engine first (the ``inputs`` named held at 0), as NVIDIA's traces expect
    to start from; each dump writes the memory region's bytes to FILE, also after a
    failed check (the caller can name the first differing byte).
    While the testbench waits for a request, simulated time stands still."""
    played = cycles = 0
    with open(requests) as rq, open(replies, "w") as rp:
        for line in rq:
            request = json.loads(line)
            if request.get("quit"):
                break
            try:
                if request.get("reset"):
                    await reset(dut, *inputs, clock=False)
                res = await play(dut, Path(request["trace"]), hw, target)
                reply = {"ok": True, "cycles": res["wait_cycles"],
                         "seconds": res["wait_seconds"], "trace_cycles": res["trace_cycles"],
                         "crc_checks": res["crc_checks"]}
                played += 1
                cycles += res["trace_cycles"]
            except (TraceError, AssertionError) as exc:
                reply = {"ok": False, "reason": str(exc)}
            for addr, size, file in request.get("dumps", []):    # failed or not
                try:
                    if isinstance(target, RamTarget):
                        await target.fetch(addr, size)
                    target.dram.read(addr, size).tofile(file)
                except Exception as exc:
                    reply = {"ok": False, "reason": f"dump of {addr:#x}+{size:#x}: {exc}"}
            rp.write(json.dumps(reply) + "\n")
            rp.flush()
    return {"traces": played, "trace_cycles": cycles}


@cocotb.test()
async def play_trace(dut) -> None:
    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    if os.environ.get("OPENDLA_RTL_MEMORY") == "ram":
        from accel.rtl.generate import RAM_ENGINE_BYTES
        target, inputs = RamTarget(dut, hw, RAM_ENGINE_BYTES), ("req", "mem_valid")
    else:
        target, inputs = DramTarget(Dram()), ("req",)
        attach_memory(dut, target=target)
    await reset(dut, *inputs)
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    summary = await serve(dut, hw, target, os.environ["OPENDLA_TRACE_REQUESTS"],
                          os.environ["OPENDLA_TRACE_REPLIES"], inputs)
    if path:
        with open(path, "w") as f:
            json.dump({**summary, "sim_time_ns": get_sim_time("ns"), "clock_ns": CLOCK_NS}, f)
