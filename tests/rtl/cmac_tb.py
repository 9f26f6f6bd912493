"""cocotb testbench of the RTL CMAC (``accel/rtl/cmac.py``).

Run through ``tests/rtl/test_cmac.py`` (pytest, marker ``rtl``) or
``opendla rtl test``; both go through :func:`accel.rtl.sim.run_cocotb`, which
passes the configuration in ``OPENDLA_RTL_CONFIG``.

The scoreboard is the cmodel's :func:`accel.cmod.cmac.mac_atoms`: the monitor
watches the handshakes, and for every data atom the CMAC accepts it computes
the expected sums from the atom and the kernels loaded so far (including a
weight beat accepted in the same cycle, the documented ordering rule).  Every
``result`` beat must equal the oldest outstanding expectation; at the end the
counts must match and nothing may come out late.
"""

from __future__ import annotations

import json
import os
from collections import deque

import cocotb
import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from accel.arith import sign_extend
from accel.cmod.cmac import mac_atoms
from accel.config import HwConfig
from accel.rtl.cmac import DataAtomLayout, ResultLayout, WeightLayout, capacity, pipeline_depth

CLOCK_NS = 10


def pack(shape: object, value: object) -> int:
    """Bits of ``value`` laid out as the Amaranth ``shape`` (struct/array/scalar)."""
    if isinstance(shape, data.ArrayLayout):
        width = Shape.cast(shape.elem_shape).width
        return sum(pack(shape.elem_shape, v) << (i * width) for i, v in enumerate(value))
    if isinstance(shape, data.StructLayout):
        return sum(pack(field.shape, value[name]) << field.offset for name, field in shape)
    width = Shape.cast(shape).width
    return int(value) & ((1 << width) - 1)


def mask_bits(mask: np.ndarray) -> int:
    """Lane mask array (bool per lane, lane 0 first) -> integer with bit i = lane i."""
    return sum(1 << i for i, on in enumerate(mask) if on)


class TB:
    """Owns the clock, reset, the three port drivers and the monitor/scoreboard."""

    def __init__(self, dut: object, cfg: HwConfig, rng: np.random.Generator) -> None:
        self.dut, self.cfg, self.rng = dut, cfg, rng
        self.k, self.c = cfg.atomic_k, cfg.atomic_c
        self.data_layout = DataAtomLayout(cfg)
        self.weight_layout = WeightLayout(cfg)
        self.result_bits = cfg.mac_result_bits
        assert Shape.cast(ResultLayout(cfg)).width == self.k * self.result_bits
        # Model of the weights held in the cells (as loaded, masks separate),
        # exactly what the scoreboard needs to call mac_atoms.
        self.weights = np.zeros((self.k, self.c), dtype=np.int64)
        self.weight_mask = np.ones((self.k, self.c), dtype=bool)
        self.expected: deque[np.ndarray] = deque()
        self.accepted = 0
        self.received = 0
        self.stalled_cycles = 0
        self.ready_prob = 1.0

    # --- clock and reset ---------------------------------------------------------
    async def start(self) -> None:
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        dut.data__valid.value = 0
        dut.data__payload.value = 0
        dut.weight__valid.value = 0
        dut.weight__payload.value = 0
        dut.result__ready.value = 0
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        cocotb.start_soon(self._monitor())
        cocotb.start_soon(self._drive_ready())

    # --- drivers ------------------------------------------------------------------
    async def _send(self, valid: object, payload: object, ready: object, value: int) -> None:
        """Hold one beat on a stream until the DUT accepts it."""
        payload.value = value
        valid.value = 1
        while True:
            await ReadOnly()
            taken = bool(ready.value)
            await RisingEdge(self.dut.clk)
            if taken:
                break
        valid.value = 0

    async def _gap(self, idle_prob: float) -> None:
        while self.rng.random() < idle_prob:
            await RisingEdge(self.dut.clk)

    async def send_atoms(self, atoms: np.ndarray, masks: np.ndarray,
                         idle_prob: float = 0.0) -> None:
        """Drive ``atoms[N, C]`` with lane ``masks[N, C]``, random idle cycles between."""
        dut = self.dut
        for atom, mask in zip(atoms, masks, strict=True):
            await self._gap(idle_prob)
            value = pack(self.data_layout, {"data": atom, "mask": mask_bits(mask)})
            await self._send(dut.data__valid, dut.data__payload, dut.data__ready, value)

    async def load_kernels(self, kernels: np.ndarray, weights: np.ndarray, masks: np.ndarray,
                           idle_prob: float = 0.0) -> None:
        """Load ``weights[i]`` (mask ``masks[i]``) into cell ``kernels[i]``, one beat each."""
        dut = self.dut
        for k, w, mask in zip(kernels, weights, masks, strict=True):
            await self._gap(idle_prob)
            value = pack(self.weight_layout, {"data": w, "mask": mask_bits(mask), "kernel": k})
            await self._send(dut.weight__valid, dut.weight__payload, dut.weight__ready, value)

    async def _drive_ready(self) -> None:
        """Random back-pressure on ``result``: ready high with ``self.ready_prob``."""
        while True:
            self.dut.result__ready.value = int(self.rng.random() < self.ready_prob)
            await RisingEdge(self.dut.clk)

    # --- monitor and scoreboard -----------------------------------------------------
    def _unpack_atom(self, value: int) -> tuple[np.ndarray, np.ndarray]:
        lay = self.data_layout
        lanes = (value >> lay["data"].offset) & ((1 << (8 * self.c)) - 1)
        atom = sign_extend(np.array([(lanes >> (8 * i)) & 0xFF for i in range(self.c)]), 8)
        bits = value >> lay["mask"].offset
        return atom, np.array([(bits >> i) & 1 for i in range(self.c)], dtype=bool)

    def _unpack_result(self, value: int) -> np.ndarray:
        r = self.result_bits
        return sign_extend(np.array([(value >> (r * k)) & ((1 << r) - 1)
                                     for k in range(self.k)], dtype=object).astype(np.int64), r)

    async def _monitor(self) -> None:
        """Sample the settled handshakes each cycle; they transfer at the next edge."""
        dut = self.dut
        held: int | None = None  # result payload offered but not taken last cycle
        while True:
            await ReadOnly()
            if dut.weight__valid.value and dut.weight__ready.value:
                beat = int(dut.weight__payload.value)
                lay = self.weight_layout
                k = (beat >> lay["kernel"].offset) & ((1 << lay["kernel"].width) - 1)
                w, m = self._unpack_atom(
                    ((beat >> lay["data"].offset) & ((1 << 8 * self.c) - 1))
                    | (((beat >> lay["mask"].offset) & ((1 << self.c) - 1)) << 8 * self.c))
                self.weights[k], self.weight_mask[k] = w, m
            if dut.data__valid.value and dut.data__ready.value:
                atom, mask = self._unpack_atom(int(dut.data__payload.value))
                # Scoreboard: kernels including this cycle's weight beat (ordering rule).
                self.expected.append(mac_atoms(atom[None], self.weights, mask[None],
                                               self.weight_mask)[0])
                self.accepted += 1
            valid = bool(dut.result__valid.value)
            payload = int(dut.result__payload.value) if valid else None
            if held is not None:
                # Stream rule: an offered beat stays valid and unchanged until taken.
                assert valid and payload == held, "result changed or dropped while stalled"
            if valid and dut.result__ready.value:
                assert self.expected, "result beat with no atom outstanding (duplicate?)"
                got = self._unpack_result(payload)
                want = self.expected.popleft()
                assert np.array_equal(got, want), (
                    f"result #{self.received}: got {got.tolist()}, want {want.tolist()}")
                self.received += 1
                held = None
            else:
                held = payload if valid else None
                self.stalled_cycles += valid
            await RisingEdge(dut.clk)

    async def drain(self, extra_cycles: int = 0) -> None:
        """Wait until every accepted atom has come out, then check nothing else does."""
        limit = 50 * (len(self.expected) + pipeline_depth(self.cfg) + 10)
        for _ in range(limit):
            if not self.expected:
                break
            await RisingEdge(self.dut.clk)
        assert not self.expected, f"{len(self.expected)} results missing after {limit} cycles"
        for _ in range(extra_cycles + 2 * pipeline_depth(self.cfg)):
            await RisingEdge(self.dut.clk)
        assert self.received == self.accepted, (self.received, self.accepted)


def config_from_env() -> HwConfig:
    return HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))


def _record(name: str, tb: TB) -> None:
    """Add this test's counts to the summary file the pytest runner reads."""
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if not path:
        return
    summary = json.loads(open(path).read()) if os.path.exists(path) else {
        "config": tb.cfg.name, "vectors": 0, "sim_time_ns": 0, "stalled_cycles": 0,
        "clock_ns": CLOCK_NS}
    summary["vectors"] += tb.received
    summary["stalled_cycles"] += tb.stalled_cycles
    summary["sim_time_ns"] = get_sim_time("ns")
    summary[name] = tb.received
    with open(path, "w") as f:
        json.dump(summary, f)


def _seed() -> int:
    return int(os.environ.get("COCOTB_RANDOM_SEED", "1"))


# Hand-computed sums for the extreme operands (C lanes, all masks set):
# -128*-128 = 16384, -128*127 = -16256, 127*127 = 16129.
EXTREMES = [(-128, -128, 16384), (-128, 127, -16256), (127, -128, -16256), (127, 127, 16129),
            (0, -128, 0), (-1, -128, 128)]


@cocotb.test()
async def extreme_values(dut: object) -> None:
    """All lanes at -128/127 (the largest sums), masks all 0 / all 1 / alternating."""
    cfg = config_from_env()
    tb = TB(dut, cfg, np.random.default_rng(_seed()))
    await tb.start()
    tb.ready_prob = 0.5
    k, c = cfg.atomic_k, cfg.atomic_c
    full = np.ones((k, c), dtype=bool)
    for d, w, per_lane in EXTREMES:
        await tb.load_kernels(np.arange(k), np.full((k, c), w), full)
        # Hand table first, independent of the scoreboard function.
        assert (mac_atoms(np.full((1, c), d), np.full((k, c), w)) == per_lane * c).all()
        await tb.send_atoms(np.full((4, c), d), np.ones((4, c), dtype=bool), idle_prob=0.3)
        await tb.drain()
    # Masks: no lanes, alternating lanes, one lane; weight masks off for odd cells
    # (a disabled cell must output 0), alternating for even ones.
    alt = np.arange(c) % 2 == 0
    wmask = np.zeros((k, c), dtype=bool)
    wmask[0::2] = ~alt
    await tb.load_kernels(np.arange(k), np.full((k, c), -128), wmask)
    masks = np.array([np.zeros(c, bool), alt, ~alt, np.arange(c) == c - 1, np.ones(c, bool)])
    await tb.send_atoms(np.full((len(masks), c), -128), masks)
    await tb.drain()
    _record("extreme_values", tb)


@cocotb.test()
async def random_atoms(dut: object) -> None:
    """2500 random atoms, kernels reloaded concurrently, idle gaps, random back-pressure."""
    cfg = config_from_env()
    rng = np.random.default_rng(_seed() + 1)
    tb = TB(dut, cfg, rng)
    await tb.start()
    k, c = cfg.atomic_k, cfg.atomic_c
    await tb.load_kernels(np.arange(k), rng.integers(-128, 128, (k, c)), np.ones((k, c), bool))
    n_atoms, n_loads = 2500, 600
    # Operands: uniform int8, with a quarter of the lanes forced to an edge value.
    atoms = rng.integers(-128, 128, (n_atoms, c))
    edge = rng.random((n_atoms, c)) < 0.25
    atoms[edge] = rng.choice([-128, 127, 0, -1], edge.sum())
    masks = np.ones((n_atoms, c), dtype=bool)
    partial = rng.random(n_atoms) < 0.3
    masks[partial] = rng.random((partial.sum(), c)) < 0.6
    kernels = rng.integers(0, k, n_loads)
    weights = rng.integers(-128, 128, (n_loads, c))
    wmasks = rng.random((n_loads, c)) < 0.9
    # Back-pressure phases: free-flowing, heavy stalls, random.
    for prob, lo, hi in [(1.0, 0, 500), (0.15, 500, 900), (0.6, 900, n_atoms)]:
        tb.ready_prob = prob
        sl = slice(lo * n_loads // n_atoms, hi * n_loads // n_atoms)
        loader = cocotb.start_soon(tb.load_kernels(kernels[sl], weights[sl], wmasks[sl],
                                                   idle_prob=0.7))
        await tb.send_atoms(atoms[lo:hi], masks[lo:hi], idle_prob=0.2)
        await loader
    tb.ready_prob = 0.5
    await tb.drain()
    assert tb.received == n_atoms, (tb.received, n_atoms)
    dut._log.info("%s: %d atoms checked, %d stalled result cycles, sim time %.0f ns",
                  cfg.name, tb.received, tb.stalled_cycles, get_sim_time("ns"))
    _record("random_atoms", tb)


@cocotb.test()
async def stalled_pipeline_fills(dut: object) -> None:
    """With ``result`` stalled, idle gaps in the input must not leave bubbles: the
    array keeps accepting until it holds ``capacity`` atoms, then takes no more."""
    cfg = config_from_env()
    rng = np.random.default_rng(_seed() + 2)
    tb = TB(dut, cfg, rng)
    await tb.start()
    k, c = cfg.atomic_k, cfg.atomic_c
    await tb.load_kernels(np.arange(k), rng.integers(-128, 128, (k, c)), np.ones((k, c), bool))
    tb.ready_prob = 0.0
    depth = capacity(cfg)
    # Offer more atoms than fit, with a gap of several cycles between them.
    sender = cocotb.start_soon(tb.send_atoms(rng.integers(-128, 128, (depth + 3, c)),
                                             np.ones((depth + 3, c), bool), idle_prob=0.8))
    for _ in range(40 * depth + 100):
        await RisingEdge(dut.clk)
    assert tb.accepted == depth and tb.received == 0, (tb.accepted, tb.received, depth)
    tb.ready_prob = 1.0
    await sender
    await tb.drain()
    assert tb.received == depth + 3
    _record("stalled_pipeline_fills", tb)
