"""cocotb testbench of the RTL CSB register file (``accel/rtl/csb_regs.py``).

Random CSB traffic - writes of random values to every register of the
implemented units (S_POINTER flips among them), reads, completions of enabled
operations, interrupt clears, sets and masks, requests to unmapped addresses -
against the cmodel's register file (:class:`accel.cmod.csb.UnitRegs` and
:class:`accel.cmod.glb.Glb`): every read, ``irq``, every ``op_en`` and the
whole consumer-group view each unit's datapath sees must match after every step.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from accel.cmod.csb import UnitRegs
from accel.cmod.glb import Glb
from accel.regs import UNITS, by_address
from accel.rtl.csb_regs import (
    CONV_UNITS,
    DONE_SOURCES,
    HW_STATUS,
    READ_LATENCY,
    WRITE_LATENCY,
    d_registers,
    port_name,
)

CLOCK_NS = 10
STEPS = 3000
SOURCE_OF = {"CDMA_DAT_DONE": "CDMA_DAT", "CDMA_WT_DONE": "CDMA_WT", "CACC_DONE": "CACC",
             "SDP_DONE": "SDP"}


class Model:
    def __init__(self) -> None:
        self.regs = {u: UnitRegs(UNITS[u]) for u in CONV_UNITS}
        for (unit, name), value in HW_STATUS.items():
            self.regs[unit].set_hw(name, value)
        self.glb = Glb(self.regs["NVDLA_GLB"])

    def write(self, addr: int, value: int) -> None:
        reg = by_address(addr)
        if reg.unit == "NVDLA_GLB" and self.glb.csb_write(reg.name, value):
            return
        self.regs[reg.unit].write(reg, value)

    def read(self, addr: int) -> int:
        reg = by_address(addr)
        return self.regs[reg.unit].read(reg)

    def done(self, unit: str) -> None:
        group = self.regs[unit].consumer
        self.regs[unit].finish()
        for source in DONE_SOURCES.get(unit, ()):
            self.glb.raise_done(SOURCE_OF[source], group)

    def view(self, unit: str) -> list[int]:
        regs = self.regs[unit]
        return [regs.read(r, regs.consumer) for r in d_registers(unit)]


@cocotb.test()
async def random_csb_traffic(dut) -> None:
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")))
    model = Model()
    addresses = [r.address for u in CONV_UNITS for r in UNITS[u].registers.values()]
    pointers = [UNITS[u].registers["S_POINTER"].address for u in CONV_UNITS
                if "S_POINTER" in UNITS[u].registers]
    op_enables = [UNITS[u].registers["D_OP_ENABLE"].address for u in CONV_UNITS
                  if "D_OP_ENABLE" in UNITS[u].registers]
    done_units = [u for u in CONV_UNITS if "D_OP_ENABLE" in UNITS[u].registers]
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    dut.req.value = 0
    for u in done_units:
        getattr(dut, f"{port_name(u)}_done").value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

    counts = {"writes": 0, "reads": 0, "dones": 0, "errors": 0, "irq_cycles": 0,
              "write_and_done": 0}
    for step in range(STEPS):
        kind = rng.random()
        req = None
        done = None
        landing = None          # a unit completing as the write lands
        if kind < 0.45:                                  # a write
            pick = rng.random()
            addr = int(rng.choice(pointers if pick < 0.1 else op_enables if pick < 0.25
                                  else addresses))
            value = int(rng.integers(0, 2**32))
            if addr == UNITS["NVDLA_GLB"].registers["S_INTR_SET"].address:
                value &= int(rng.integers(0, 2**32)) & int(rng.integers(0, 2**32))  # sparse
            req = (addr, 1, value)
            # now and then the written register's unit completes in the cycle the write
            # lands (WRITE_LATENCY cycles on; it lands in the producer's group, which the
            # completion does not move); not with a write of its op enable, which the
            # two would set apart
            owner = by_address(addr).unit
            if owner in done_units and model.regs[owner].enabled() and rng.random() < 0.5 \
                    and addr != UNITS[owner].registers["D_OP_ENABLE"].address:
                landing = owner
                counts["write_and_done"] += 1
        elif kind < 0.8:                                 # a read, often of GLB's status
            glb = [r.address for r in UNITS["NVDLA_GLB"].registers.values()]
            req = (int(rng.choice(glb if rng.random() < 0.3 else addresses)), 0, 0)
        elif kind < 0.95:                                # an enabled op completes
            enabled = [u for u in done_units if model.regs[u].enabled()]
            if enabled:
                done = enabled[int(rng.integers(len(enabled)))]
        else:                                            # nothing is mapped there
            req = (int(rng.choice([0x0FFC, 0x2000, 0x30EC, 0xA000, 0x12345678])),
                   int(rng.integers(2)), 0)
        if req is not None:
            addr, write, value = req
            dut.req.value = 1 | (addr << 1) | (write << 33) | (value << 34)
        if done is not None:
            getattr(dut, f"{port_name(done)}_done").value = 1
        await RisingEdge(dut.clk)           # the completion acts, the request is taken
        dut.req.value = 0
        if done is not None:
            getattr(dut, f"{port_name(done)}_done").value = 0
        for i in range(WRITE_LATENCY):      # ... and acts
            if landing is not None and i == WRITE_LATENCY - 1:
                getattr(dut, f"{port_name(landing)}_done").value = 1
            await RisingEdge(dut.clk)
        if landing is not None:
            getattr(dut, f"{port_name(landing)}_done").value = 0
        await ReadOnly()
        for unit in (done, landing):
            if unit is not None:
                model.done(unit)
                counts["dones"] += 1
        mapped = req is not None and by_address(req[0]) is not None \
            and by_address(req[0]).unit in CONV_UNITS
        want = None                         # a read's value, as the request found it
        if req is not None and mapped and req[1]:
            model.write(req[0], req[2])
            counts["writes"] += 1
        elif req is not None and mapped:
            want = model.read(req[0])
        # everything the datapath sees
        assert int(dut.irq.value) == int(model.glb.status != 0), f"step {step}: irq"
        counts["irq_cycles"] += int(dut.irq.value)
        for u in done_units:
            assert int(getattr(dut, f"{port_name(u)}_op_en").value) == int(
                model.regs[u].enabled()), f"step {step}: {u} op_en"
            raw = int(getattr(dut, f"{port_name(u)}_regs").value)
            got = [(raw >> (32 * i)) & 0xFFFFFFFF for i in range(len(d_registers(u)))]
            assert got == model.view(u), f"step {step}: {u} consumer-group registers"
        # the read's data and the error come READ_LATENCY cycles after the request
        for _ in range(READ_LATENCY - 1 - WRITE_LATENCY):
            await RisingEdge(dut.clk)
        await ReadOnly()
        if req is not None and not mapped:
            assert dut.error.value == 1, f"step {step}: no error for {req[0]:#x}"
            assert dut.rvalid.value == (not req[1]), f"step {step}: rvalid of {req[0]:#x}"
            if not req[1]:
                assert int(dut.rdata.value) == 0, f"step {step}: {req[0]:#x} does not read 0"
            counts["errors"] += 1
        elif want is not None:
            assert dut.rvalid.value == 1 and dut.error.value == 0, f"step {step}: rvalid"
            assert int(dut.rdata.value) == want, \
                f"step {step}: read {by_address(req[0]).symbol} = {int(dut.rdata.value):#x}, " \
                f"model {want:#x}"
            counts["reads"] += 1
        else:
            assert dut.rvalid.value == 0 and dut.error.value == 0, f"step {step}: a response"
        await FallingEdge(dut.clk)
    assert min(counts.values()) > 10, counts
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({**counts, "steps": STEPS, "vectors": STEPS,
                       "sim_time_ns": get_sim_time("ns"), "clock_ns": CLOCK_NS}, f)
