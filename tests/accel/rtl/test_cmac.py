"""Fast check of the CMAC in Amaranth's own simulator (the full cocotb run is tests/rtl)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from amaranth.sim import Simulator

from accel.cmod.cmac import mac_atoms
from accel.config import get_preset
from accel.rtl.cmac import Cmac, CmacSignature, DataAtomLayout, WeightLayout, pipeline_depth


def _small():
    return dataclasses.replace(get_preset("nv_small"), name="c4k2", mac_atomic_c_size=4,
                               mac_atomic_k_size=2, memory_atomic_size=4)


def test_signature_depends_on_config() -> None:
    assert CmacSignature(get_preset("nv_small")) == CmacSignature(get_preset("nv_small"))
    assert CmacSignature(get_preset("nv_small")) != CmacSignature(_small())
    # input register, the lanes' copies per cell, the operands, products, their copies,
    # three adder levels (8 lanes)
    assert pipeline_depth(get_preset("nv_small")) == 5 + 3


def test_int16_config_is_refused() -> None:
    cfg = dataclasses.replace(get_preset("nv_small"), weight_data_type_int8=False)
    # The signature is where the check lives (Cmac builds it first); constructing
    # it directly avoids an unused-Elaboratable warning from a half-built Cmac.
    with pytest.raises(ValueError, match="int8 only"):
        CmacSignature(cfg)


def test_random_atoms_with_backpressure_match_cmodel() -> None:
    cfg = _small()
    dut = Cmac(cfg)
    rng = np.random.default_rng(7)
    n = 40
    weights = rng.integers(-128, 128, (cfg.atomic_k, cfg.atomic_c))
    weights[0] = -128  # one kernel at the extreme
    atoms = rng.integers(-128, 128, (n, cfg.atomic_c))
    atoms[:4] = -128
    masks = rng.random((n, cfg.atomic_c)) < 0.8
    got: list[list[int]] = []

    async def bench(ctx):
        for k in range(cfg.atomic_k):
            ctx.set(dut.weight.payload, WeightLayout(cfg).const(
                {"data": weights[k].tolist(), "mask": (1 << cfg.atomic_c) - 1, "kernel": k}))
            ctx.set(dut.weight.valid, 1)
            await ctx.tick()
        ctx.set(dut.weight.valid, 0)
        sent = 0
        for _cycle in range(20 * n):
            if sent < n:
                bits = sum(1 << i for i in range(cfg.atomic_c) if masks[sent, i])
                ctx.set(dut.data.payload, DataAtomLayout(cfg).const(
                    {"data": atoms[sent].tolist(), "mask": bits}))
                ctx.set(dut.data.valid, 1)
            else:
                ctx.set(dut.data.valid, 0)
            ctx.set(dut.result.ready, int(rng.random() < 0.5))
            # Sample the handshakes before the edge that transfers them.
            _, _, taken, out_valid, out_ready, payload = await ctx.tick().sample(
                dut.data.ready, dut.result.valid, dut.result.ready, dut.result.payload)
            if sent < n and taken:
                sent += 1
            if out_valid and out_ready:
                got.append([int(x) for x in payload])
            if len(got) == n:
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = mac_atoms(atoms, weights, masks)
    assert len(got) == n
    assert np.array_equal(np.array(got), want)
    assert want[0, 0] == 16384 * int(masks[0].sum())  # hand value: -128 x -128 per lane
