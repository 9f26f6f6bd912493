"""cocotb testbench of the register-programmed convolution engine (``accel/rtl/conv_engine.py``).

The engine's AXI4 port is served by ``cocotbext-axi``'s AXI RAM with random
pauses on all five channels (back-pressure and latency).  Each operation puts
a random input cube (NVDLA feature layout with random line/surface gaps), its
weights (direct-convolution order) and the SDP operand tables (8- or 16-bit,
one or both components, as the random X1/X2 stages need them) into memory,
fills the output region with random bytes, and is programmed as software
would: ``S_POINTER`` selects the register group (alternating, so both
ping-pong groups serve), then CDMA, CSC, CACC, SDP_RDMA and SDP registers are
written field by field over the CSB port (:mod:`accel.regs` packs the fields)
and the units are enabled.  When the done interrupt rises, the output cube is
read back from memory and checked against plain numpy sums and the cmodel's
arithmetic (as in ``conv_tb``), the bytes between its lines and surfaces must
be untouched, and ``S_INTR_STATUS`` must hold the CACC and SDP done bits of
the operation's group (CDMA's are masked, as NVIDIA's traces do) and clear
when software writes them back.  Every third operation has CDMA's input converter on
(``D_CVT_CFG.CVT_EN``, random offset, scale and truncation; :func:`random_converter`),
its reference taking the input through the converter written plainly here
(:func:`converted`).  With ``OPENDLA_ENGINE_LARGE=1`` four
convolutions with register values past 12 and 4 bits follow the random ones.
"""

from __future__ import annotations

import itertools
import json
import os

import cocotb
import numpy as np
from cocotb.triggers import First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiBus, AxiRam, AxiSlave
from conv_tb import conv_label, expected, large_convs, post_config, random_conv, reference, reset

from accel.config import HwConfig
from accel.layout import CubeLayout, pack_dc_weights, pack_feature, unpack_feature
from accel.regs import field_set, lookup
from accel.rtl.conv_engine import OP_UNITS
from accel.rtl.csb_regs import READ_LATENCY, WRITE_LATENCY

CLOCK_NS = 10
OPERATIONS = int(os.environ.get("OPENDLA_ENGINE_OPERATIONS", "12"))
#: then also :func:`conv_tb.large_convs` (an engine with memories for them: engine_traces)
LARGE = os.environ.get("OPENDLA_ENGINE_LARGE") == "1"
MEMORY = 1 << 22                        # bytes of AXI RAM
#: SDP_RDMA DATA_USE codes
USE_MUL, USE_ALU, USE_BOTH = 0, 1, 2


def attach_memory(dut, rng: np.random.Generator | None = None, size: int = MEMORY,
                  target=None):
    """cocotbext-axi's AXI RAM (or an AXI slave over ``target``) on the engine's port;
    with ``rng``, every channel pauses at random (about one cycle in four)."""
    bus = AxiBus.from_prefix(dut, "axi_")
    if target is None:
        mem = AxiRam(bus, dut.clk, dut.rst, size=size)
    else:
        mem = AxiSlave(bus, dut.clk, dut.rst, target=target)
    cocotb.start_soon(check_bursts(dut))
    if rng is not None:
        channels = (mem.read_if.ar_channel, mem.read_if.r_channel, mem.write_if.aw_channel,
                    mem.write_if.w_channel, mem.write_if.b_channel)
        for channel in channels:
            pauses = [bool(v) for v in rng.random(97) < 0.25]
            channel.set_pause_generator(itertools.cycle(pauses))
    return mem


async def check_bursts(dut) -> None:
    """Fail on an AXI4 address that breaks the burst rules the engine must keep: none
    across a 4 KiB boundary, aligned to the bus word, INCR (at most 256 beats is the
    8-bit length field's own limit)."""
    width = len(dut.axi__rdata) // 8
    while True:
        await RisingEdge(dut.clk)
        for ch in ("ar", "aw"):
            if dut[f"axi__{ch}valid"].value == 1 and dut[f"axi__{ch}ready"].value == 1:
                addr = int(dut[f"axi__{ch}addr"].value)
                beats = int(dut[f"axi__{ch}len"].value) + 1
                last = addr + beats * width - 1
                assert addr % width == 0, f"{ch}addr {addr:#x} not on a bus word"
                assert int(dut[f"axi__{ch}burst"].value) == 1, f"{ch}burst not INCR"
                assert addr >> 12 == last >> 12, \
                    f"{ch} burst {addr:#x}..{last:#x} ({beats} beats) crosses 4 KiB"


async def csb_write(dut, symbol: str, value: int = 0, **fields: int) -> None:
    """Write a register; returns once the write has changed it."""
    reg = lookup(symbol)
    for name, v in fields.items():
        value = field_set(value, reg, name, v)
    dut.req.value = 1 | (reg.address << 1) | (1 << 33) | ((value & 0xFFFFFFFF) << 34)
    await RisingEdge(dut.clk)
    dut.req.value = 0
    for _ in range(WRITE_LATENCY):
        await RisingEdge(dut.clk)


async def csb_read(dut, symbol: str) -> int:
    dut.req.value = 1 | (lookup(symbol).address << 1)
    await RisingEdge(dut.clk)
    dut.req.value = 0
    for _ in range(READ_LATENCY - 1):
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert dut.rvalid.value == 1 and dut.error.value == 0, symbol
    value = int(dut.rdata.value)
    await RisingEdge(dut.clk)
    return value


def random_converter(rng: np.random.Generator) -> tuple[int, int, int]:
    """CDMA's input converter ``(offset, scale, truncate)``: scales around ``2**truncate``,
    so that outputs spread over int8 and saturate at times (one in eight truncations past
    the 34-bit product, where every output is 0), offsets mostly near the data."""
    t = int(rng.integers(36, 64)) if rng.random() < 0.125 else int(rng.integers(0, 15))
    bound = min(1 << min(t + 1, 15), (1 << 15) - 1)
    offset = int(rng.integers(-(1 << 15), 1 << 15)) if rng.random() < 0.2 else \
        int(rng.integers(-160, 160))
    return offset, int(rng.integers(-bound, bound + 1)), t


def converted(x: np.ndarray, converter: tuple[int, int, int] | None) -> np.ndarray:
    """``x`` through CDMA's input converter (NVDLA_FACTS "CDMA input converter", on feature
    input with ``CVT_OFFSET`` as every channel's mean): ``(x - offset) * scale`` shifted right
    by ``truncate`` rounding half away from zero, saturated to 17 then 8 bits."""
    if converter is None:
        return x
    offset, scale, t = converter
    v = (x.astype(np.int64) - offset) * scale
    if t:
        v = np.sign(v) * ((np.abs(v) + (1 << (t - 1))) >> t)
    return np.clip(np.clip(v, -(1 << 16), (1 << 16) - 1), -128, 127)


async def program(dut, group: int, conv: dict, post: dict, dma: dict, write=csb_write) -> None:
    """The registers of one operation, in group ``group``, as a driver writes them;
    ``dma``: the addresses and strides of the cubes in memory (:func:`place`); ``write``:
    how (default: the CSB port)."""
    w = write
    for unit in OP_UNITS:
        await w(dut, f"{unit}.S_POINTER", PRODUCER=group)
    # SDP_RDMA's groups move on only with the operations that use it: its own pointer
    await w(dut, "NVDLA_SDP_RDMA.S_POINTER", PRODUCER=dma["rdma_group"])
    fl, ol = dma["feature"], dma["output"]
    await w(dut, "NVDLA_CDMA.D_DATAIN_SIZE_0", DATAIN_WIDTH=conv["w"] - 1,
            DATAIN_HEIGHT=conv["h"] - 1)
    await w(dut, "NVDLA_CDMA.D_DATAIN_SIZE_1", DATAIN_CHANNEL=conv["c"] - 1)
    await w(dut, "NVDLA_CDMA.D_DAIN_ADDR_LOW_0", dma["feature_addr"])
    await w(dut, "NVDLA_CDMA.D_LINE_STRIDE", fl.line_stride)
    await w(dut, "NVDLA_CDMA.D_SURF_STRIDE", fl.surf_stride)
    await w(dut, "NVDLA_CDMA.D_WEIGHT_ADDR_LOW", dma["weight_addr"])
    await w(dut, "NVDLA_CDMA.D_WEIGHT_BYTES", dma["weight_bytes"])
    await w(dut, "NVDLA_CDMA.D_WEIGHT_SIZE_1", WEIGHT_KERNEL=conv["k"] - 1)
    cvt = conv.get("converter")
    if cvt is None:
        await w(dut, "NVDLA_CDMA.D_CVT_CFG", CVT_EN=0)
    else:
        await w(dut, "NVDLA_CDMA.D_CVT_CFG", CVT_EN=1, CVT_TRUNCATE=cvt[2])
        await w(dut, "NVDLA_CDMA.D_CVT_OFFSET", CVT_OFFSET=cvt[0] & 0xFFFF)
        await w(dut, "NVDLA_CDMA.D_CVT_SCALE", CVT_SCALE=cvt[1] & 0xFFFF)
    for stage, (rdma, p) in (("x1", ("BRDMA", "BS")), ("x2", ("NRDMA", "BN"))):
        table = dma["operands"].get(stage)
        if table is None:
            await w(dut, f"NVDLA_SDP_RDMA.D_{rdma}_CFG", **{f"{rdma}_DISABLE": 1})
            continue
        await w(dut, f"NVDLA_SDP_RDMA.D_{rdma}_CFG", **{
            f"{rdma}_DISABLE": 0, f"{rdma}_DATA_USE": table["use"],
            f"{rdma}_DATA_SIZE": table["wide"], f"{rdma}_DATA_MODE": 0})
        await w(dut, f"NVDLA_SDP_RDMA.D_{p}_BASE_ADDR_LOW", table["addr"])
    # SDP takes the convolution's sums (FLYING_MODE on; off, it would read memory)
    await w(dut, "NVDLA_SDP.D_FEATURE_MODE_CFG", FLYING_MODE=1)
    await w(dut, "NVDLA_SDP.D_DST_BASE_ADDR_LOW", dma["output_addr"])
    await w(dut, "NVDLA_SDP.D_DST_LINE_STRIDE", ol.line_stride)
    await w(dut, "NVDLA_SDP.D_DST_SURFACE_STRIDE", ol.surf_stride)
    await w(dut, "NVDLA_CSC.D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=conv["w"] - 1,
            DATAIN_HEIGHT_EXT=conv["h"] - 1)
    await w(dut, "NVDLA_CSC.D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=conv["c"] - 1)
    await w(dut, "NVDLA_CSC.D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=conv["s"] - 1,
            WEIGHT_HEIGHT_EXT=conv["r"] - 1)
    await w(dut, "NVDLA_CSC.D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=conv["c"] - 1,
            WEIGHT_KERNEL=conv["k"] - 1)
    await w(dut, "NVDLA_CSC.D_DATAOUT_SIZE_0", DATAOUT_WIDTH=conv["out_w"] - 1,
            DATAOUT_HEIGHT=conv["out_h"] - 1)
    await w(dut, "NVDLA_CSC.D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=conv["k"] - 1)
    await w(dut, "NVDLA_CSC.D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=conv["stride_x"] - 1,
            CONV_Y_STRIDE_EXT=conv["stride_y"] - 1)
    await w(dut, "NVDLA_CSC.D_DILATION_EXT", X_DILATION_EXT=conv["dilation_x"] - 1,
            Y_DILATION_EXT=conv["dilation_y"] - 1)
    await w(dut, "NVDLA_CSC.D_ZERO_PADDING", PAD_LEFT=conv["pad_left"],
            PAD_TOP=conv["pad_top"])
    await w(dut, "NVDLA_CSC.D_ZERO_PADDING_VALUE", PAD_VALUE=conv["pad_value"] & 0xFFFF)
    await w(dut, "NVDLA_CACC.D_CLIP_CFG", CLIP_TRUNCATE=post["truncate"])
    for stage, p in (("x1", "BS"), ("x2", "BN")):
        st = post[stage]
        await w(dut, f"NVDLA_SDP.D_DP_{p}_CFG", **{
            f"{p}_BYPASS": st["bypass"], f"{p}_ALU_BYPASS": st["alu_bypass"],
            f"{p}_ALU_ALGO": st["alu_algo"], f"{p}_MUL_BYPASS": st["mul_bypass"],
            f"{p}_MUL_PRELU": st["prelu"], f"{p}_RELU_BYPASS": st["relu_bypass"]})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_ALU_CFG", **{f"{p}_ALU_SHIFT_VALUE": st["alu_shift"],
                                                       f"{p}_ALU_SRC": st["alu_src"]})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_ALU_SRC_VALUE",
                **{f"{p}_ALU_OPERAND": st["alu_operand"] & 0xFFFF})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_MUL_CFG", **{f"{p}_MUL_SHIFT_VALUE": st["mul_shift"],
                                                       f"{p}_MUL_SRC": st["mul_src"]})
        await w(dut, f"NVDLA_SDP.D_DP_{p}_MUL_SRC_VALUE",
                **{f"{p}_MUL_OPERAND": st["mul_operand"] & 0xFFFF})
    await w(dut, "NVDLA_SDP.D_CVT_OFFSET", CVT_OFFSET=post["cvt_offset"] & 0xFFFFFFFF)
    await w(dut, "NVDLA_SDP.D_CVT_SCALE", CVT_SCALE=post["cvt_scale"] & 0xFFFF)
    await w(dut, "NVDLA_SDP.D_CVT_SHIFT", CVT_SHIFT=post["cvt_shift"])


def _strided(hw: HwConfig, c: int, h: int, w: int, rng: np.random.Generator) -> CubeLayout:
    """A cube layout with random gaps after each line and surface."""
    atom = hw.atom_size
    line = (w + int(rng.integers(0, 3))) * atom
    surf = h * line + int(rng.integers(0, 3)) * atom
    layout = CubeLayout(c, h, w, atom, line, surf)
    layout.validate()
    return layout


def place(ram, hw: HwConfig, conv: dict, post: dict, operands: dict,
          rng: np.random.Generator) -> dict:
    """Put the operation's input, weights and operand tables into memory, fill its output
    region with random bytes; returns the addresses and layouts."""
    atom = hw.atom_size
    cursor = 0x1000 + atom * int(rng.integers(0, 64))

    def alloc(size: int) -> int:
        nonlocal cursor
        addr = cursor
        cursor += -(-size // atom) * atom + atom * int(rng.integers(0, 4))
        return addr

    fl = _strided(hw, conv["c"], conv["h"], conv["w"], rng)
    feature_addr = alloc(fl.size)
    ram.write(feature_addr, pack_feature(conv["x"][0], fl).tobytes())
    weights = pack_dc_weights(conv["wt"], hw, pad_to=atom)
    # the bytes past the weights in their last word are read but belong to no kernel:
    # garbage there must not reach this operation's entries nor the next one's
    used = conv["k"] * conv["c"] * conv["r"] * conv["s"]
    weights[used:] = rng.integers(1, 256, weights.size - used, dtype=np.uint8)
    weight_addr = alloc(weights.size)
    ram.write(weight_addr, weights.tobytes())
    kgs = -(-conv["k"] // hw.atomic_k)
    tables = {}
    for stage, alu, mul in (("x1", "alu1", "mul1"), ("x2", "alu2", "mul2")):
        st = post[stage]
        if st["bypass"]:
            continue
        comps = [n for n, on in ((alu, st["alu_src"] and not st["alu_bypass"]),
                                 (mul, st["mul_src"] and not st["mul_bypass"])) if on]
        if not comps:
            continue
        wide = int(any(np.abs(operands[n]).max() > 127 for n in comps))
        use = USE_BOTH if len(comps) == 2 else (USE_ALU if comps == [alu] else USE_MUL)
        values = np.stack([operands[n] for n in comps], axis=-1).reshape(-1)
        raw = values.astype("<i2" if wide else np.int8).view(np.uint8)
        assert raw.size == kgs * hw.atomic_k * len(comps) * (1 + wide)
        addr = alloc(raw.size)
        ram.write(addr, raw.tobytes())
        tables[stage] = {"addr": addr, "use": use, "wide": wide}
    ol = _strided(hw, conv["k"], conv["out_h"], conv["out_w"], rng)
    output_addr = alloc(ol.size)
    ram.write(output_addr, rng.integers(0, 256, ol.size, dtype=np.uint8).tobytes())
    assert cursor < MEMORY
    return {"feature": fl, "feature_addr": feature_addr, "weight_addr": weight_addr,
            "weight_bytes": used,
            "operands": tables, "output": ol, "output_addr": output_addr,
            "output_before": np.frombuffer(ram.read(output_addr, ol.size), np.uint8).copy()}


def random_tables(rng: np.random.Generator, kernels: int) -> dict:
    """Per-kernel operands: int16, or (half the stages) int8, stored 8-bit."""
    tables = {}
    for x1x2 in ("1", "2"):
        bound = 2**15 if rng.random() < 0.5 else 2**7
        for name in ("alu", "mul"):
            tables[name + x1x2] = rng.integers(-bound, bound, kernels)
    return tables


def check_output(ram, hw: HwConfig, conv: dict, dma: dict, want: np.ndarray, label: str) -> int:
    """The output cube in memory equals ``want`` [K, OH, OW]; the gaps are untouched."""
    ol, base = dma["output"], dma["output_addr"]
    raw = np.frombuffer(ram.read(base, ol.size), np.uint8)
    got = unpack_feature(raw, ol).astype(np.int64)
    bad = np.argwhere(got != want)
    assert bad.size == 0, (f"{label}: {len(bad)} outputs differ, first (k, y, x) = "
                           f"{tuple(bad[0])}: got {got[tuple(bad[0])]}, want {want[tuple(bad[0])]}")
    # every byte the cube's atoms do not cover keeps its random value
    written = np.zeros(ol.size, bool)
    for surface in range(ol.surfaces):
        for y in range(ol.height):
            start = surface * ol.surf_stride + y * ol.line_stride
            written[start:start + ol.width * hw.atom_size] = True
    stray = np.flatnonzero(~written & (raw != dma["output_before"]))
    assert stray.size == 0, f"{label}: bytes outside the cube written, first at +{stray[0]:#x}"
    return want.size


async def wait_interrupt(dut, cycles: int, label: str) -> None:
    if dut.irq.value != 1:
        edge = await First(RisingEdge(dut.irq), Timer(cycles * CLOCK_NS, unit="ns"))
        assert isinstance(edge, RisingEdge), f"{label}: no interrupt within {cycles} cycles"


@cocotb.test()
async def register_programmed_convolutions(dut) -> None:
    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")))
    ram = attach_memory(dut, rng)
    await reset(dut, "req")
    # NVIDIA's traces mask CDMA's data and weight done interrupts; so do we
    await csb_write(dut, "NVDLA_GLB.S_INTR_MASK", CDMA_DAT_DONE_MASK0=1, CDMA_DAT_DONE_MASK1=1,
                    CDMA_WT_DONE_MASK0=1, CDMA_WT_DONE_MASK1=1)

    checked = irqs = rdma_group = 0
    start = get_sim_time("ns")
    large = large_convs(rng) if LARGE else []
    for op in range(OPERATIONS + len(large)):
        group = op % 2
        conv = random_conv(rng, hw.atomic_c, hw.atomic_k) if op < OPERATIONS else \
            large[op - OPERATIONS]
        if op % 3 == 1 and op < OPERATIONS:
            conv["converter"] = random_converter(rng)
        label = conv_label(op, conv)
        sums = reference(dict(conv, x=converted(conv["x"], conv.get("converter"))))
        kgs = -(-conv["k"] // hw.atomic_k)
        operands = random_tables(rng, kgs * hw.atomic_k)     # SDP_RDMA's per-kernel tables
        # every fourth operation with register operands only: SDP_RDMA stays out of it
        # (its pointer must not move); the random stages of the others nearly always read
        # some table
        per_kernel = {n: v[:conv["k"]] for n, v in operands.items()} if op % 4 != 3 else None
        post = post_config(rng, sums, per_kernel)
        want = expected(conv, post, sums, per_kernel)
        dma = place(ram, hw, conv, post, operands, rng)
        dma["rdma_group"] = rdma_group
        await program(dut, group, conv, post, dma)
        assert dut.irq.value == 0
        every = ["NVDLA_SDP", "NVDLA_SDP_RDMA", "NVDLA_CACC", "NVDLA_CMAC_A", "NVDLA_CMAC_B",
                 "NVDLA_CSC", "NVDLA_CDMA"]
        units = [u for u in every if dma["operands"] or u != "NVDLA_SDP_RDMA"]
        for unit in units:
            await csb_write(dut, f"{unit}.D_OP_ENABLE", OP_EN=1)
        macs = conv["out_h"] * conv["out_w"] * conv["r"] * conv["s"] * kgs * -(
            -conv["c"] // hw.atomic_c)
        await wait_interrupt(dut, 20 * macs + 20000, label)
        assert dut.bus_error.value == 0, f"{label}: AXI error response"
        checked += check_output(ram, hw, conv, dma, want, label)
        irqs += 1
        status = await csb_read(dut, "NVDLA_GLB.S_INTR_STATUS")
        reg = lookup("NVDLA_GLB.S_INTR_STATUS")
        want_bits = (reg.field(f"CACC_DONE_STATUS{group}").mask
                     | reg.field(f"SDP_DONE_STATUS{group}").mask)
        assert status == want_bits, f"operation {op}: status {status:#x}, want {want_bits:#x}"
        # the consumer moved on to the other group, SDP_RDMA's only if it took part; the
        # enables are clear
        if dma["operands"]:
            rdma_group ^= 1
        for unit in every:
            pointer = await csb_read(dut, f"{unit}.S_POINTER")
            want_group = rdma_group if unit == "NVDLA_SDP_RDMA" else 1 - group
            assert (pointer >> 16) & 1 == want_group, f"operation {op}: {unit} {pointer:#x}"
            assert await csb_read(dut, f"{unit}.D_OP_ENABLE") == 0, f"{label}: {unit} enabled"
        await csb_write(dut, "NVDLA_GLB.S_INTR_STATUS", status)
        await RisingEdge(dut.clk)
        assert dut.irq.value == 0, f"operation {op}: interrupt not cleared"
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({"config": hw.name, "operations": OPERATIONS + len(large),
                       "vectors": checked,
                       "interrupts": irqs, "sim_time_ns": get_sim_time("ns"),
                       "cycles": int((get_sim_time("ns") - start) / CLOCK_NS),
                       "clock_ns": CLOCK_NS}, f)
