"""cocotb testbench of the RTL post-processing pipeline (``accel/rtl/postproc.py``).

Run through ``tests/rtl/test_postproc.py`` (pytest, marker ``rtl``), which goes
through :func:`accel.rtl.sim.run_cocotb`.

For each of many random register configurations (truncate, X1, X2 with every
ALU algorithm, multiplier, PReLU and ReLU option, operands from registers or
per lane from memory, converter), random beats of 34-bit accumulators are
driven with random gaps while the output is randomly stalled; a third of the
beats are exact halves at the truncate position, where only the rounding
rule decides the result.  The scoreboard
is the cmodel's arithmetic (:func:`accel.cmod.cacc.clip_truncate`,
:func:`accel.cmod.sdp.x_stage`, :func:`accel.cmod.sdp.output_cvt`): every
output beat must equal the oldest outstanding expectation, int8 values and
both saturation flags.  Shifts are drawn from the data so that values spread
over the int8 range instead of saturating.
"""

from __future__ import annotations

import json
import os
from collections import deque

import cocotb
import numpy as np
from amaranth.hdl import Shape
from cmac_tb import pack
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from accel.arith import saturation_mask, shift_round
from accel.cmod.cacc import clip_truncate
from accel.cmod.sdp import StageConfig, output_cvt, x_stage
from accel.config import HwConfig
from accel.rtl.postproc import BeatLayout, ConfigLayout

CLOCK_NS = 10
CONFIGS = 60
BEATS = 12
OPERANDS = ("alu1", "mul1", "alu2", "mul2")


def _bits(v: np.ndarray) -> int:
    return int(np.max(np.abs(v))).bit_length() if np.size(v) else 0


def random_stage(rng: np.random.Generator) -> dict:
    return {"bypass": int(rng.random() < 0.15), "alu_bypass": int(rng.random() < 0.3),
            "alu_algo": int(rng.integers(3)), "mul_bypass": int(rng.random() < 0.25),
            "prelu": int(rng.random() < 0.2), "relu_bypass": int(rng.random() < 0.6),
            "alu_src": int(rng.integers(2)), "alu_shift": int(rng.integers(12)),
            "alu_operand": int(rng.integers(-2**15, 2**15)), "mul_src": int(rng.integers(2)),
            "mul_shift": 0, "mul_operand": int(rng.integers(-2**15, 2**15))}


def stage_config(s: dict) -> StageConfig:
    return StageConfig(bool(s["bypass"]), bool(s["alu_bypass"]), s["alu_algo"],
                       bool(s["mul_bypass"]), bool(s["prelu"]), bool(s["relu_bypass"]),
                       bool(s["alu_src"]), s["alu_shift"], s["alu_operand"], bool(s["mul_src"]),
                       s["mul_shift"], s["mul_operand"])


def model_x(c: dict, acc: np.ndarray, ops: dict) -> tuple[np.ndarray, np.ndarray]:
    """int32 result of X2 and CACC's per-lane saturation flags."""
    scaled = shift_round(acc.astype(np.int64), c["truncate"])
    cacc_sat = saturation_mask(scaled, 32)
    x, _ = clip_truncate(acc.astype(np.int64), c["truncate"])
    for name, alu, mul in (("x1", "alu1", "mul1"), ("x2", "alu2", "mul2")):
        s = c[name]
        x = x_stage(x, stage_config(s), ops[alu] if s["alu_src"] else s["alu_operand"],
                    ops[mul] if s["mul_src"] else s["mul_operand"])
    return x, cacc_sat


def model(c: dict, acc: np.ndarray, ops: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, cacc_sat = model_x(c, acc, ops)
    out, cvt_sat = output_cvt(x, c["cvt_offset"], c["cvt_scale"], c["cvt_shift"])
    return out, cacc_sat, cvt_sat


def random_case(rng: np.random.Generator, lanes: int) -> tuple[dict, list]:
    """A configuration and its beats; shifts fitted to the data's range."""
    truncate = int(rng.integers(17))
    # one case in five passes the truncated sums straight to the output (X1, X2 bypassed,
    # the converter the identity): CACC's rounding of exact halves shows in every beat
    transparent = rng.random() < 0.2
    beats = []
    for _ in range(BEATS):
        kind = rng.random()
        if kind < 0.15:                       # 34-bit sums: CACC saturation
            acc = rng.integers(-2**33, 2**33, lanes)
        elif kind < 0.45 and truncate:        # exact halves: the rounding rule decides
            half_range = 60 if transparent else 2**12
            odd = 2 * rng.integers(-half_range, half_range, lanes) + 1
            acc = odd << (truncate - 1)
        else:
            acc = rng.integers(-2**22, 2**22, lanes)
        beats.append((acc.astype(np.int64),
                      {f: rng.integers(-2**15, 2**15, lanes) for f in OPERANDS}))
    c = {"truncate": truncate, "x1": random_stage(rng), "x2": random_stage(rng),
         "cvt_offset": int(rng.integers(-64, 64)), "cvt_scale": 1, "cvt_shift": 0}
    c["x1"]["mul_shift"] = max(0, _bits(np.concatenate(
        [clip_truncate(a.copy(), c["truncate"])[0] for a, _ in beats])) - 15
        + int(rng.integers(-3, 4)))
    c["x2"]["mul_shift"] = int(rng.integers(8, 24))
    xs = np.concatenate([model_x(c, a, o)[0] for a, o in beats])
    c["cvt_scale"] = int(rng.integers(1, 2**15)) * (1 if rng.random() < 0.8 else -1)
    c["cvt_shift"] = min(63, max(0, _bits(xs) + _bits(np.array([c["cvt_scale"]])) - 7
                                 + int(rng.integers(-1, 2))))
    if transparent:
        c["x1"]["bypass"] = c["x2"]["bypass"] = 1
        c.update(cvt_offset=0, cvt_scale=1, cvt_shift=0)
    return c, beats


@cocotb.test()
async def random_configurations(dut) -> None:
    cfg = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    lanes = cfg.atomic_k
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")))
    cfg_layout, beat_layout = ConfigLayout(), BeatLayout(cfg)
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    dut.inp__valid.value = 0
    dut.out__ready.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0

    checked = stalled = 0
    outputs = []
    for case in range(CONFIGS):
        c, beats = random_case(rng, lanes)
        dut.cfg.value = pack(cfg_layout, c)
        dut.inp__valid.value = 0
        for _ in range(2):                  # the registers hold two cycles before a beat
            await RisingEdge(dut.clk)
        expected: deque = deque(model(c, a, o) for a, o in beats)
        sent = 0
        while expected:
            if sent < len(beats) and rng.random() < 0.8:
                acc, ops = beats[sent]
                dut.inp__payload.value = pack(beat_layout, {"acc": acc, **ops})
                dut.inp__valid.value = 1
            else:
                dut.inp__valid.value = 0
            ready = rng.random() < 0.7
            dut.out__ready.value = int(ready)
            await ReadOnly()
            took = dut.inp__valid.value == 1 and dut.inp__ready.value == 1
            if dut.out__valid.value == 1:
                if ready:
                    raw = int(dut.out__payload.value)
                    data = [((raw >> (8 * k)) & 0xFF) for k in range(lanes)]
                    data = [v - 256 if v > 127 else v for v in data]
                    cacc_sat = (raw >> (8 * lanes)) & ((1 << lanes) - 1)
                    cvt_sat = (raw >> (9 * lanes)) & ((1 << lanes) - 1)
                    want, want_cacc, want_cvt = expected.popleft()
                    assert data == [int(v) for v in want], \
                        f"config {case}: got {data}, want {list(want)}; {c}"
                    assert cacc_sat == sum(1 << k for k in range(lanes) if want_cacc[k]), case
                    assert cvt_sat == sum(1 << k for k in range(lanes) if want_cvt[k]), case
                    checked += 1
                    outputs.extend(data)
                else:
                    stalled += 1
            await RisingEdge(dut.clk)
            if took:
                sent += 1
        assert sent == len(beats)
    dut.inp__valid.value = 0
    spread = len({v for v in outputs if -128 < v < 127})
    assert spread > 100, f"outputs cover only {spread} non-saturated int8 values"
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump({"config": cfg.name, "configs": CONFIGS, "vectors": checked,
                       "stalled_cycles": stalled, "sim_time_ns": get_sim_time("ns"),
                       "clock_ns": CLOCK_NS, "distinct_outputs": spread,
                       "payload_bits": Shape.cast(beat_layout).width}, f)
