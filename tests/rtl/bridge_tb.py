"""cocotb testbench of the FPGA build's core (``BridgedEngine``: engine, block RAM, UART bridge).

Everything goes through the UART pins, bit by bit, with the commands the host
driver sends (:mod:`fpga.protocol`'s encoder; responses checked by its
``check_response``): memory written and read back, a register written and
read back, a bad opcode's successor still understood... then a convolution:
its input, weights and operand tables written into the board RAM, its
registers programmed, the interrupt status polled until SDP's done bit, and
its output read back and checked against plain numpy sums and the cmodel's
arithmetic (as ``engine_tb`` does over the CSB port).
"""

from __future__ import annotations

import json
import os
import select
import socket
from pathlib import Path

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, Timer
from cocotb.utils import get_sim_time
from conv_tb import expected, post_config, reference, reset
from engine_tb import check_output, place, program, random_tables

from accel.config import HwConfig
from accel.regs import field_set, lookup
from fpga import protocol
from fpga.bridge import SIMULATION_DIVISOR

DIVISOR = SIMULATION_DIVISOR      # the bridged_engine top's cycles per bit
CLOCK_NS = 10
BIT_NS = DIVISOR * CLOCK_NS
ACCEPT_TIMEOUT_S = 900           # the relay's wait for the host driver
RAM_BYTES = protocol.RAM_BYTES    # the bridged_engine top has the board's memories


class UartHost:
    """The host end of the UART, on the design's ``rx``/``tx`` pins."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.commands = 0

    async def send(self, data: bytes) -> None:
        """8N1 frames on ``rx``, a bit every ``DIVISOR`` clock periods (as a host UART
        sends: no alignment to the design's clock)."""
        for byte in data:
            for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                self.dut.rx.value = bit
                await Timer(BIT_NS, unit="ns")

    async def receive(self, count: int) -> bytes:
        """``count`` bytes from ``tx``, each sampled in the middle of its bits."""
        out = bytearray()
        for _ in range(count):
            if self.dut.tx.value == 1:
                await FallingEdge(self.dut.tx)               # the start bit
            await Timer(BIT_NS * 3 // 2, unit="ns")
            byte = 0
            for i in range(8):
                byte |= int(self.dut.tx.value) << i
                await Timer(BIT_NS, unit="ns")
            assert self.dut.tx.value == 1, f"no stop bit after byte {len(out)}"
            await Timer(BIT_NS // 2, unit="ns")              # to the end of the stop bit
            out.append(byte)
        return bytes(out)

    async def call(self, command: bytes) -> bytes:
        answer = cocotb.start_soon(self.receive(protocol.response_size(command)))
        await self.send(command)
        self.commands += 1
        return protocol.check_response(command, await answer)

    async def write_reg(self, dut, symbol: str, value: int = 0, **fields: int) -> None:
        """``engine_tb.program``'s register write, over the UART."""
        reg = lookup(symbol)
        for name, v in fields.items():
            value = field_set(value, reg, name, v)
        await self.call(protocol.write_reg(reg.address, value))

    async def read_reg(self, symbol: str) -> int:
        raw = await self.call(protocol.read_reg(lookup(symbol).address))
        return int.from_bytes(raw, "little")


class Staged:
    """``engine_tb.place``'s memory: the writes, sent over the UART afterwards."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, bytes]] = []

    def write(self, addr: int, data: bytes) -> None:
        assert addr + len(data) <= RAM_BYTES, "the test's data must fit the board RAM"
        self.writes.append((addr, bytes(data)))

    def read(self, addr: int, size: int) -> bytes:
        return next(d[:size] for a, d in self.writes if a == addr)


class Readback:
    def __init__(self, addr: int, data: bytes) -> None:
        self.addr, self.data = addr, data

    def read(self, addr: int, size: int) -> bytes:
        assert addr == self.addr
        return self.data[:size]


@cocotb.test()
async def host_drives_the_engine_over_uart(dut) -> None:
    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")))
    dut.rx.value = 1
    await reset(dut)
    await ClockCycles(dut.clk, 2 * DIVISOR)
    host = UartHost(dut)

    # memory and registers round trip
    pattern = rng.integers(0, 256, 37, dtype=np.uint8).tobytes()
    await host.call(protocol.write_mem(0x8000_0003, pattern))      # off the word, any base
    assert await host.call(protocol.read_mem(0x8000_0003, 37)) == pattern
    await host.write_reg(dut, "NVDLA_SDP.D_CVT_SCALE", 0x1234)
    assert await host.read_reg("NVDLA_SDP.D_CVT_SCALE") == 0x1234

    # one convolution, driven as the host driver does
    await host.write_reg(dut, "NVDLA_GLB.S_INTR_MASK", CDMA_DAT_DONE_MASK0=1,
                         CDMA_DAT_DONE_MASK1=1, CDMA_WT_DONE_MASK0=1, CDMA_WT_DONE_MASK1=1)
    # channels and kernels off the atom, padding: small, the UART moves every byte
    conv = {"c": 10, "h": 4, "w": 4, "k": 9, "r": 3, "s": 3, "stride_y": 1, "stride_x": 1,
            "dilation_y": 1, "dilation_x": 1, "pad_top": 1, "pad_left": 1, "out_h": 4,
            "out_w": 4, "pad_value": 0,
            "x": rng.integers(-128, 128, (1, 10, 4, 4)), "wt": rng.integers(-128, 128,
                                                                            (9, 10, 3, 3))}
    sums = reference(conv)
    operands = random_tables(rng, 2 * hw.atomic_k)
    per_kernel = {n: v[:conv["k"]] for n, v in operands.items()}
    post = post_config(rng, sums, per_kernel)
    want = expected(conv, post, sums, per_kernel)
    staged = Staged()
    dma = place(staged, hw, conv, post, operands, rng)
    dma["rdma_group"] = 0
    log = dut._log
    log.info("memory and registers round-tripped; writing %d regions",  len(staged.writes))
    for addr, data in staged.writes:
        await host.call(protocol.write_mem(addr, data))
    log.info("programming the convolution")
    await program(dut, 0, conv, post, dma, write=host.write_reg)
    units = ["NVDLA_SDP", "NVDLA_SDP_RDMA", "NVDLA_CACC", "NVDLA_CMAC_A", "NVDLA_CMAC_B",
             "NVDLA_CSC", "NVDLA_CDMA"]
    if not dma["operands"]:
        units.remove("NVDLA_SDP_RDMA")
    for unit in units:
        await host.write_reg(dut, f"{unit}.D_OP_ENABLE", OP_EN=1)
    done = lookup("NVDLA_GLB.S_INTR_STATUS").field("SDP_DONE_STATUS0").mask
    for _ in range(50):
        status = await host.read_reg("NVDLA_GLB.S_INTR_STATUS")
        if status & done:
            break
    else:
        raise AssertionError(f"SDP done never set (S_INTR_STATUS={status:#x})")
    assert dut.irq.value == 1 and dut.bus_error.value == 0
    log.info("done; reading the output")
    ol = dma["output"]
    out = await host.call(protocol.read_mem(dma["output_addr"], ol.size))
    checked = check_output(Readback(dma["output_addr"], out), hw, conv, dma, want,
                           "convolution over the UART")
    await host.write_reg(dut, "NVDLA_GLB.S_INTR_STATUS", status)
    assert await host.read_reg("NVDLA_GLB.S_INTR_STATUS") == 0
    summary = {"config": hw.name, "commands": host.commands, "vectors": checked}
    port_file = os.environ.get("OPENDLA_BRIDGE_PORT_FILE")
    if port_file:
        summary["relayed"] = await relay(host, port_file)
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({**summary, "sim_time_ns": get_sim_time("ns"), "clock_ns": CLOCK_NS}, f)


async def relay(host: UartHost, port_file: str) -> dict:
    """The simulated board on a TCP port (written to ``port_file``), for the host driver
    (``opendla fpga run --port socket://127.0.0.1:PORT``): bytes from the client go out on
    the UART's ``rx`` pin, bytes from ``tx`` go back, until the client closes.

    Simulated time runs only while the board owes an answer (the relay follows the
    commands to know); while the host is busy, the relay waits on the socket and the
    simulation stands still, so the cycle count is the board's."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    Path(port_file).write_text(str(server.getsockname()[1]))
    server.settimeout(ACCEPT_TIMEOUT_S)       # a host that never comes must not hang CI
    try:
        conn, _ = server.accept()             # blocks: nothing to simulate meanwhile
    except TimeoutError:
        raise AssertionError(f"no host connected within {ACCEPT_TIMEOUT_S} s") from None
    finally:
        server.close()
    conn.settimeout(None)
    counts = {"to_board": 0, "from_board": 0, "commands": 0}
    owed = 0                                  # response bytes the board has yet to send
    pending = b""                             # bytes of an incomplete command

    async def answers() -> None:
        nonlocal owed
        while True:
            data = await host.receive(1)
            conn.sendall(data)
            counts["from_board"] += 1
            owed -= 1

    pump = cocotb.start_soon(answers())
    byte_time = Timer(10 * BIT_NS, unit="ns")
    while True:
        ready, _, _ = select.select([conn], [], [], 0 if owed else None)
        if not ready:
            await byte_time                   # the board is working on an answer
            continue
        data = conn.recv(1 << 16)
        if not data:                          # the client closed the link
            break
        pending += data
        while pending and len(pending) >= protocol.command_size(pending):
            size = protocol.command_size(pending)
            owed += protocol.response_size(pending[:size])
            counts["commands"] += 1
            pending = pending[size:]
        await host.send(data)
        counts["to_board"] += len(data)
    pump.cancel()
    conn.close()
    return counts

