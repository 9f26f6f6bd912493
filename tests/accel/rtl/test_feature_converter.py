"""CDMA's input converter (:class:`accel.rtl.cdma.FeatureConverter`) in Amaranth's simulator.

Random words through random converter settings, and the words through with the converter
off, against :func:`accel.cmod.cdma.read_feature`'s converter (the cmodel) and against the
rule written plainly here (NVDLA_FACTS "CDMA input converter": ``(x - offset) * scale``
shifted right by ``truncate``, rounding half away from zero, saturated to 17 and then 8
bits).  Valid words come with gaps, so the pipeline's timing is checked too: every word
leaves exactly ``LATENCY`` cycles after it entered.  Image input's settings are in
the mix: a lane's offset from its byte's place in a 4-byte pixel (a channel's mean), and
bytes read unsigned.
"""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from accel.cmod.cdma_image import convert
from accel.rtl.cdma import FeatureConverter

LANES = 8


def _plain(x: int, offset: int, scale: int, t: int) -> int:
    v = (x - offset) * scale
    if t:
        mag = (abs(v) + (1 << (t - 1))) >> t
        v = mag if v >= 0 else -mag
    return max(-128, min(127, max(-(1 << 16), min((1 << 16) - 1, v))))


def _settings(rng: np.random.Generator) -> list[tuple[int, list[int], int, int, int]]:
    """(enable, the four lane offsets, scale, truncate, unsigned): hand-picked edges, then
    random ones."""
    edges = [(1, 0, 1, 0), (1, -128, 1, 0), (1, 0, -1, 0), (1, 127, 32767, 0),
             (1, -32768, -32768, 0), (1, 0, 3, 1), (1, 1, -3, 1), (1, 5, 1, 2),
             (1, 0, 1, 34), (1, -32768, 32767, 35), (1, -32768, -32768, 63), (0, 99, -7, 3)]
    settings = [(e, [o] * 4, s, t, 0) for e, o, s, t in edges]
    # bytes read unsigned: 255 saturates without a mean, a mean of 128 centres them, and
    # the lanes' four means differ
    settings += [(1, [0] * 4, 1, 0, 1), (1, [128] * 4, 1, 0, 1), (1, [-5, 0, 255, 300], 1, 1, 1),
                 (0, [7, 8, 9, 10], 3, 2, 1)]
    for _ in range(24):
        t = int(rng.integers(0, 64)) if rng.random() < 0.2 else int(rng.integers(0, 12))
        b = min(1 << min(t + 1, 15), 32767)
        unsigned = int(rng.random() < 0.3)
        offsets = [int(v) for v in rng.integers(-300, 300, 4)] if unsigned \
            else [int(rng.integers(-300, 300))] * 4
        settings.append((int(rng.random() < 0.9), offsets, int(rng.integers(-b, b + 1)), t,
                         unsigned))
    return settings


def test_random_words_against_the_cmodel_and_a_plain_rule():
    rng = np.random.default_rng(5)
    dut = FeatureConverter(LANES)
    results = []

    async def bench(ctx):
        for enable, offsets, scale, t, unsigned in _settings(rng):
            ctx.set(dut.cfg, {"enable": enable, "offset": offsets, "scale": scale,
                              "truncate": t, "unsigned": unsigned})
            ctx.set(dut.valid, 0)
            for _ in range(FeatureConverter.LATENCY + 2):      # the settings settle
                await ctx.tick()
            words = rng.integers(-128, 128, (40, LANES))
            words[:3] = [[-128] * LANES, [127] * LANES, [0] * LANES]
            sent, got, cycle = [], [], 0
            while len(got) < len(words):
                send = len(sent) < len(words) and rng.random() < 0.7
                if send:
                    w = words[len(sent)]
                    ctx.set(dut.word, int.from_bytes(w.astype(np.int8).tobytes(), "little"))
                    sent.append(cycle)
                ctx.set(dut.valid, int(send))
                await ctx.tick()
                cycle += 1
                if ctx.get(dut.out_valid):
                    raw = ctx.get(dut.out).to_bytes(LANES, "little")
                    got.append((cycle, np.frombuffer(raw, np.int8).astype(np.int64)))
                assert ctx.get(dut.busy) == any(c >= cycle - FeatureConverter.LATENCY
                                                for c in sent), cycle
            results.append(((enable, offsets, scale, t, unsigned), words, sent, got))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()

    converted_any = 0
    for (enable, offsets, scale, t, unsigned), words, sent, got in results:
        assert [c for c, _ in got] == [c + FeatureConverter.LATENCY for c in sent]
        out = np.array([v for _, v in got])
        if not enable:                          # the byte as it is, read as int8
            assert np.array_equal(out, words)
            continue
        x = words % 256 if unsigned else words
        lane_offsets = np.array(offsets * (LANES // 4))
        plain = np.array([[_plain(int(v), int(lane_offsets[i]), scale, t)
                           for i, v in enumerate(row)] for row in x])
        cmodel = convert(x, lane_offsets, scale, t)
        assert np.array_equal(out, plain), (offsets, scale, t, unsigned)
        assert np.array_equal(out, cmodel), (offsets, scale, t, unsigned)
        converted_any += int(not np.array_equal(out, words))
    assert converted_any >= 25          # the settings do change the data
