"""cocotb testbench of the RTL direct-convolution core (``accel/rtl/conv_core.py``).

Random convolutions (channels and kernels off the atom, several channel and
kernel groups, 1..3 x 1..3 kernels, strides and dilations 1..2, padding with
a random pad value, every X1/X2/CVT option, 34-bit sums that saturate) run on
the core with a randomly stalled output.  The expected int8 outputs come from
tengine_host's plain-numpy convolution sums
(:func:`accel.golden.int8_ref.accumulate`, independent of the cmodel's CSC
and CMAC) followed by the cmodel's CACC/SDP/CVT arithmetic.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cmac_tb import pack
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.utils import get_sim_time
from postproc_tb import _bits, random_stage, stage_config

from accel.cmod.cacc import clip_truncate
from accel.cmod.sdp import output_cvt, x_stage
from accel.config import HwConfig
from accel.golden.int8_ref import accumulate
from accel.rtl.conv_layout import ConvConfigLayout, stripe_points, write_layout
from accel.rtl.dma import rows_first

CLOCK_NS = 10
POINTS = 16                     # the core's CACC entries (ConvCore's default)
CONFIGS = int(os.environ.get("OPENDLA_CONV_CONFIGS", "50"))
STREAMED = 12                   # convolutions with their memories written while they run


def random_conv(rng: np.random.Generator, n_c: int, n_k: int) -> dict:
    while True:
        c, k = int(rng.integers(1, 3 * n_c)), int(rng.integers(1, 2 * n_k + 3))
        h, w = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        r, s = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        sy, sx, dy, dx = (int(v) for v in rng.integers(1, 3, 4))
        pt, pl = int(rng.integers(0, r)), int(rng.integers(0, s))
        if _out_size(h, r, sy, dy, pt) >= 1 and _out_size(w, s, sx, dx, pl) >= 1:
            return make_conv(rng, c, h, w, k, (r, s), (sy, sx), (dy, dx), (pt, pl))


def large_convs(rng: np.random.Generator) -> list[dict]:
    """Convolutions with register values past 12 bits (channels, width, output width) and
    past 4 bits (kernel height, dilation, padding): the engine's fields hold every value
    the registers can give."""
    return [
        make_conv(rng, 4100, 1, 3, 9, (1, 1), (1, 1), (1, 1), (0, 0)),
        make_conv(rng, 3, 1, 4100, 2, (1, 3), (1, 1), (1, 1), (0, 0)),
        make_conv(rng, 5, 20, 3, 3, (17, 2), (1, 1), (1, 1), (16, 1)),
        make_conv(rng, 8, 2, 20, 8, (1, 2), (1, 2), (1, 17), (0, 0)),
    ]


def _out_size(size: int, kernel: int, stride: int, dilation: int, pad: int) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def make_conv(rng: np.random.Generator, c: int, h: int, w: int, k: int,
              kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
              pad: tuple[int, int]) -> dict:
    """A convolution of random data (a fifth of them at the int8 extremes); ``kernel``,
    ``stride``, ``dilation`` and ``pad`` (top, left) are (y, x) pairs."""
    (r, s), (sy, sx), (dy, dx), (pt, pl) = kernel, stride, dilation, pad
    oh, ow = _out_size(h, r, sy, dy, pt), _out_size(w, s, sx, dx, pl)
    x = rng.integers(-128, 128, (1, c, h, w))
    wt = rng.integers(-128, 128, (k, c, r, s))
    if rng.random() < 0.2:                     # extremes: large sums, CACC saturation
        x = np.where(rng.random(x.shape) < 0.5, -128, 127)
        wt = np.where(rng.random(wt.shape) < 0.5, -128, 127)
    pad_value = int(rng.integers(-128, 128)) if rng.random() < 0.3 else 0
    # the feature memory's layout: either, at random (the fetch's choice is its own test)
    rows_first = bool(rng.random() < 0.5)
    return {"c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride_y": sy, "stride_x": sx,
            "dilation_y": dy, "dilation_x": dx, "pad_top": pt, "pad_left": pl,
            "out_h": oh, "out_w": ow, "pad_value": pad_value, "rows_first": rows_first,
            "x": x, "wt": wt}


def post_config(rng: np.random.Generator, sums: np.ndarray, operands: dict | None = None
                ) -> dict:
    """Truncate, X1, X2 and converter with shifts fitted to the sums' range; operands from
    memory (per kernel, ``operands``) where the random stages choose them, if given."""
    truncate = int(rng.integers(0, 8))
    post = {"truncate": truncate, "x1": random_stage(rng), "x2": random_stage(rng),
            "cvt_offset": int(rng.integers(-64, 64)), "cvt_scale": 1, "cvt_shift": 0}
    if operands is None:
        for stage in ("x1", "x2"):
            post[stage]["alu_src"] = post[stage]["mul_src"] = 0   # register operands only
    t, _ = clip_truncate(sums.copy(), truncate)
    post["x1"]["mul_shift"] = max(0, _bits(t) - 15 + int(rng.integers(-2, 3)))
    post["x2"]["mul_shift"] = int(rng.integers(10, 20))
    x = expected_x(post, sums, operands)
    post["cvt_scale"] = int(rng.integers(1, 2**15))
    post["cvt_shift"] = min(63, max(0, _bits(x) + _bits(np.array([post["cvt_scale"]])) - 7))
    return post


def random_operands(rng: np.random.Generator, k: int) -> dict:
    """Per-kernel SDP operands (int16) of ``k`` kernels, as SDP_RDMA would read them."""
    return {name: rng.integers(-2**15, 2**15, k) for name in ("alu1", "mul1", "alu2", "mul2")}


def expected_x(post: dict, sums: np.ndarray, operands: dict | None = None) -> np.ndarray:
    """X2's int32 result of ``sums`` [K, OH, OW]; memory operands per kernel."""
    x, _ = clip_truncate(sums.copy(), post["truncate"])
    for stage, alu, mul in (("x1", "alu1", "mul1"), ("x2", "alu2", "mul2")):
        st = post[stage]
        alu_op = operands[alu][:, None, None] if st["alu_src"] else st["alu_operand"]
        mul_op = operands[mul][:, None, None] if st["mul_src"] else st["mul_operand"]
        x = x_stage(x, stage_config(st), alu_op, mul_op)
    return x


def expected(conv: dict, post: dict, sums: np.ndarray, operands: dict | None = None
             ) -> np.ndarray:
    out, _ = output_cvt(expected_x(post, sums, operands), post["cvt_offset"],
                        post["cvt_scale"], post["cvt_shift"])
    return out


def memory_writes(hw: HwConfig, conv: dict, entries: int = 2048) -> tuple[list, list]:
    """The feature and weight memories' writes (``entries`` deep) of ``conv``, each a value
    for its write port, in address order."""
    n_c, n_k = hw.atomic_c, hw.atomic_k
    write = write_layout(hw, entries)
    groups = hw.atomic_c // hw.atom_size
    feature_write = write_layout(hw, entries, groups)
    cgs, kgs = -(-conv["c"] // n_c), -(-conv["k"] // n_k)
    xp = np.zeros((cgs * n_c, conv["h"], conv["w"]), np.int64)
    xp[:conv["c"]] = conv["x"][0]
    # atom (cg, y, x) at (cg * h + y) * w + x, or rows first at (y * cgs + cg) * w + x
    h, w = conv["h"], conv["w"]
    atoms = sorted(((y * cgs + cg) * w + x if conv["rows_first"] else (cg * h + y) * w + x,
                    cg, y, x) for cg in range(cgs) for y in range(h) for x in range(w))
    features = [pack(feature_write, {"addr": addr, "en": (1 << groups) - 1,
                                     "data": xp[cg * n_c:(cg + 1) * n_c, y, x]})
                for addr, cg, y, x in atoms]
    wp = np.zeros((kgs * n_k, cgs * n_c, conv["r"], conv["s"]), np.int64)
    wp[:conv["k"], :conv["c"]] = conv["wt"]
    weights = [pack(write, {"addr": (((kg * cgs + cg) * conv["r"] + r) * conv["s"] + s) * n_k
                            + kk, "en": 1,
                            "data": wp[kg * n_k + kk, cg * n_c:(cg + 1) * n_c, r, s]})
               for kg in range(kgs) for cg in range(cgs) for r in range(conv["r"])
               for s in range(conv["s"]) for kk in range(n_k)]
    return features, weights


async def load_memories(dut, hw: HwConfig, conv: dict, entries: int = 2048) -> None:
    """Write the feature and weight memories (``entries`` deep) through their ports, one
    atom per cycle."""
    features, weights = memory_writes(hw, conv, entries)
    for port, values in ((dut.feature_write, features), (dut.weight_write, weights)):
        for value in values:
            port.value = value
            await RisingEdge(dut.clk)
        port.value = 0


async def stream_memories(dut, hw: HwConfig, conv: dict, rng: np.random.Generator) -> None:
    """Write the memories as the fetch does while the core runs: entries in address order,
    feature and weight entries interleaved at random with random gaps, each memory's level
    raised to the entries written once a write is in."""
    pending = dict(zip(("feature", "weight"), memory_writes(hw, conv), strict=True))
    done = {name: 0 for name in pending}
    while any(done[name] < len(values) for name, values in pending.items()):
        writing = {name: done[name] < len(values) and rng.random() < 0.4
                   for name, values in pending.items()}
        for name, values in pending.items():
            getattr(dut, f"{name}_write").value = values[done[name]] if writing[name] else 0
        await RisingEdge(dut.clk)
        for name in pending:
            if writing[name]:
                done[name] += 1
                getattr(dut, f"{name}_level").value = done[name]
    dut.feature_write.value = 0
    dut.weight_write.value = 0


async def collect(dut, hw: HwConfig, conv: dict, want: np.ndarray,
                  rng: np.random.Generator | None, label: str, stripe: int) -> dict:
    """Check every output beat (kernel group, then point in raster order; ``rng``: stall
    the output at random, None: always ready; ``stripe``: points per stripe); counts and
    cycles to the last output."""
    n_k = hw.atomic_k
    kgs = -(-conv["k"] // n_k)
    total = conv["out_h"] * conv["out_w"]
    got = checked = stalled = cycles = 0
    # a core that stops producing fails here instead of hanging: 4 cycles for every atom,
    # kernel beat (a round of each per stripe, channel group and tap) and output (ready 3
    # cycles in 4), plus the start's latency
    taps = -(-conv["c"] // hw.atomic_c) * conv["r"] * conv["s"]    # with channel groups
    atoms, rounds = kgs * total * taps, kgs * -(-total // stripe) * taps
    budget = 4 * (atoms + rounds * n_k + kgs * total) + 1000
    while got < kgs * total:
        assert cycles < budget, (
            f"{label}: {got} of {kgs * total} outputs after {cycles} cycles (budget {budget})")
        ready = rng is None or rng.random() < 0.75
        dut.out__ready.value = int(ready)
        await ReadOnly()
        cycles += 1
        if dut.out__valid.value == 1:
            if ready:
                raw = int(dut.out__payload.value)
                kg, point = divmod(got, total)
                oy, ox = divmod(point, conv["out_w"])
                for kk in range(n_k):
                    kernel = kg * n_k + kk
                    if kernel >= conv["k"]:
                        continue
                    v = (raw >> (8 * kk)) & 0xFF
                    v = v - 256 if v > 127 else v
                    assert v == want[kernel, oy, ox], (
                        f"{label}: kernel {kernel} point ({oy}, {ox}) got {v}, want "
                        f"{want[kernel, oy, ox]}")
                    checked += 1
                got += 1
            else:
                stalled += 1
        await RisingEdge(dut.clk)
    return {"checked": checked, "stalled": stalled, "cycles": cycles}


def conv_label(case: int, conv: dict) -> str:
    shown = {k: v for k, v in conv.items() if k not in ("x", "wt")}
    return f"convolution {case} {shown}"


async def load_and_run(dut, hw: HwConfig, conv: dict, post: dict, want: np.ndarray,
                       rng: np.random.Generator | None, case: int,
                       stream: np.random.Generator | None = None,
                       stripe: int | None = None) -> dict:
    """The core: memories, registers on ``cfg``, start, every output checked.  ``stream``:
    the memories hold another convolution's values of the same shapes at the start, levels
    0, and the entries are written while the core runs (:func:`stream_memories`).
    ``stripe``: the points of a stripe (else the engine's choice, stripes of equal length
    within one)."""
    n_c, n_k = hw.atomic_c, hw.atomic_k
    if stream is None:
        await load_memories(dut, hw, conv)
    else:
        stale = dict(conv, x=stream.integers(-128, 128, conv["x"].shape),
                     wt=stream.integers(-128, 128, conv["wt"].shape))
        await load_memories(dut, hw, stale)
        dut.feature_level.value = 0
        dut.weight_level.value = 0
    regs = {key: conv[key] for key in ("c", "h", "w", "k", "r", "s", "stride_x", "stride_y",
                                       "dilation_x", "dilation_y", "pad_left", "pad_top",
                                       "out_w", "out_h", "pad_value", "rows_first")}
    stripe = stripe or stripe_points(conv["out_h"] * conv["out_w"], POINTS)
    regs.update(channel_groups=-(-conv["c"] // n_c), kernel_groups=-(-conv["k"] // n_k),
                post=post, stripe_points=stripe, per_element=0)   # per-kernel operands
    dut.cfg.value = pack(ConvConfigLayout(), regs)
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    if stream is not None:
        cocotb.start_soon(stream_memories(dut, hw, conv, stream))
    res = await collect(dut, hw, conv, want, rng, conv_label(case, conv), stripe)
    for _ in range(4):                      # nothing may follow the last beat
        await RisingEdge(dut.clk)
        assert dut.out__valid.value == 0 and dut.busy.value == 0, case
    return res


async def reset(dut, *inputs: str, clock: bool = True) -> None:
    """Start the clock (``clock``: else it runs already; the design makes its own when
    ``OPENDLA_RTL_CLOCK_NS`` says so, :func:`accel.rtl.sim.run_cocotb`) and reset the
    design with the inputs named held at 0 (a cycle more after ``rst`` falls: the
    simulation tops' reset is a register behind it,
    :class:`accel.rtl.generate.RegisteredReset`)."""
    inside = os.environ.get("OPENDLA_RTL_CLOCK_NS")
    if inside and int(inside) != CLOCK_NS:
        raise ValueError(f"the design's clock period is {inside} ns, the testbench's "
                         f"{CLOCK_NS} ns")
    if clock and not inside:
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    for name in inputs:
        getattr(dut, name).value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def reference(conv: dict) -> np.ndarray:
    pads = (conv["pad_top"], conv["pad_left"], conv["pad_top"], conv["pad_left"])
    return accumulate(conv["x"], conv["wt"], stride=(conv["stride_y"], conv["stride_x"]),
                      pads=pads, dilation=(conv["dilation_y"], conv["dilation_x"]),
                      pad_value=conv["pad_value"])[0]          # [K, OH, OW]


def _write_summary(update: dict) -> None:
    path = os.environ.get("OPENDLA_RTL_SUMMARY")
    if not path:
        return
    summary = json.loads(open(path).read()) if os.path.exists(path) else {}
    summary.update(update)
    with open(path, "w") as f:
        json.dump(summary, f)


@cocotb.test()
async def random_convolutions(dut) -> None:
    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")))
    await reset(dut, "start", "out__ready", "feature_write", "weight_write", "operand_write",
                "elements__valid")
    dut.weight_level.value = (1 << len(dut.weight_level)) - 1     # every entry is loaded
    dut.feature_level.value = (1 << len(dut.feature_level)) - 1
    checked = stalled = saturated = 0
    for case in range(CONFIGS):
        conv = random_conv(rng, hw.atomic_c, hw.atomic_k)
        sums = reference(conv)
        post = post_config(rng, sums)
        want = expected(conv, post, sums)
        saturated += int(np.sum(np.abs(want) == 127) + np.sum(want == -128))
        # a quarter with stripes of any length the core takes (1 to POINTS points; a third
        # of those of one point), so that rounds of a single point and a short last stripe
        # come up
        stripe = None
        if rng.random() < 0.25:
            stripe = 1 if rng.random() < 1 / 3 else int(rng.integers(2, POINTS + 1))
        res = await load_and_run(dut, hw, conv, post, want, rng, case, stripe=stripe)
        checked += res["checked"]
        stalled += res["stalled"]
    _write_summary({"config": hw.name, "convolutions": CONFIGS, "vectors": checked,
                    "saturated_outputs": saturated, "stalled_cycles": stalled,
                    "sim_time_ns": get_sim_time("ns"), "clock_ns": CLOCK_NS})


@cocotb.test()
async def memories_written_while_running(dut) -> None:
    """Random convolutions whose feature and weight entries arrive while the core runs
    (the levels rise entry by entry, the memories hold stale values until then): the core
    reads no entry before its level passes it."""
    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    rng = np.random.default_rng(int(os.environ.get("COCOTB_RANDOM_SEED", "1")) + 1)
    await reset(dut, "start", "out__ready", "feature_write", "weight_write", "operand_write",
                "feature_level", "weight_level", "elements__valid")
    for case in range(STREAMED):
        conv = random_conv(rng, hw.atomic_c, hw.atomic_k)
        sums = reference(conv)
        post = post_config(rng, sums)
        await load_and_run(dut, hw, conv, post, expected(conv, post, sums), rng, case,
                           stream=rng)
    _write_summary({"streamed": STREAMED})


#: (C, K, H, W, R, S, stride, pad) of the timed convolutions, in atoms of nv_small
TIMED = ((16, 16, 8, 8, 3, 3, 1, 1), (8, 8, 12, 12, 3, 3, 1, 1), (32, 8, 6, 6, 3, 3, 1, 1),
         (16, 16, 8, 8, 1, 1, 1, 0), (8, 16, 9, 9, 3, 3, 2, 1))


@cocotb.test()
async def cycles_against_the_cmodel(dut) -> None:
    """Cycles from start to the last output (output never stalled) against the cmodel's
    estimate, computed as the cmodel computes it for a convolution with its SDP on the fly
    (accel.cmod.perf.conv_cycles: one MAC atom per cycle, or SDP's elements at its
    throughput when that is slower), and MAC use."""
    from accel.cmod.cube import padded_channels
    from accel.cmod.perf import conv_cycles, sdp_cycles

    hw = HwConfig(**json.loads(os.environ["OPENDLA_RTL_CONFIG"]))
    rng = np.random.default_rng(7)
    await reset(dut, "start", "out__ready", "feature_write", "weight_write", "operand_write",
                "elements__valid")
    dut.weight_level.value = (1 << len(dut.weight_level)) - 1     # every entry is loaded
    dut.feature_level.value = (1 << len(dut.feature_level)) - 1
    rows = []
    for case, (c, k, h, w, r, s, stride, pad) in enumerate(TIMED):
        oh = (h + 2 * pad - r) // stride + 1
        ow = (w + 2 * pad - s) // stride + 1
        conv = {"c": c, "h": h, "w": w, "k": k, "r": r, "s": s, "stride_y": stride,
                "stride_x": stride, "dilation_y": 1, "dilation_x": 1, "pad_top": pad,
                "pad_left": pad, "out_h": oh, "out_w": ow, "pad_value": 0,
                "rows_first": rows_first(r * s, k, h, w),
                "x": rng.integers(-128, 128, (1, c, h, w)),
                "wt": rng.integers(-128, 128, (k, c, r, s))}
        sums = reference(conv)
        post = post_config(rng, sums)
        res = await load_and_run(dut, hw, conv, post, expected(conv, post, sums), None, case)
        bypass = {"D_DP_BS_CFG": post["x1"]["bypass"], "D_DP_BN_CFG": post["x2"]["bypass"],
                  "D_DP_EW_CFG": 1}
        sdp = sdp_cycles(lambda reg, _field, b=bypass: b[reg], hw,
                         padded_channels(k, hw.atom_size), oh, ow, False)
        estimate, atoms = conv_cycles(hw, (oh, ow), (k, c, r, s), 0, 0, sdp)
        rows.append({"shape": f"{c}x{h}x{w} * {k}x{c}x{r}x{s} /{stride}", "rtl": res["cycles"],
                     "cmodel": estimate, "mac_atoms": atoms,
                     "utilization": round(atoms / res["cycles"], 4)})
    _write_summary({"timed": rows})
