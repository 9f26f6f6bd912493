from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.config import PRESETS, get_preset
from accel.layout import (
    cube_layout,
    pack_dc_weights,
    pack_feature,
    pack_sdp_operand,
    unpack_dc_weights,
    unpack_feature,
    unpack_sdp_operand,
)

PRESET_NAMES = sorted(PRESETS)


def test_worked_example_offset_nv_small():
    cfg = get_preset("nv_small")
    lay = cube_layout(cfg, 10, 1, 2)
    assert (lay.line_stride, lay.surf_stride, lay.size) == (16, 16, 32)
    x = np.zeros((10, 1, 2), dtype=np.int8)
    x[9, 0, 1] = 77
    buf = pack_feature(x, lay)
    assert np.flatnonzero(buf).tolist() == [25]
    assert buf[25] == 77


def test_offsets_follow_the_format_rule_with_gaps():
    cfg = get_preset("nv_small")
    lay = cube_layout(cfg, 11, 3, 2, line_stride=24, surf_stride=96)
    x = np.arange(11 * 3 * 2, dtype=np.int64).reshape(11, 3, 2) - 30
    buf = pack_feature(x, lay, pad_value=-1)
    for c in range(11):
        for h in range(3):
            for w in range(2):
                off = (c // 8) * 96 + h * 24 + w * 8 + c % 8
                assert buf.view(np.int8)[off] == x[c, h, w]
    # padded lanes 11..15 of the second surface hold the pad value
    assert buf.view(np.int8)[96 + 8 + 3] == -1
    # stride gaps stay zero
    assert buf[16:24].tolist() == [0] * 8


def test_int16_elements_keep_atom_channels_in_twice_the_bytes():
    # nv_small: 8 int16 channels per atom, 16 bytes; channel 8 opens the second surface
    cfg = get_preset("nv_small")
    lay = cube_layout(cfg, 9, 1, 1, elem_bytes=2)
    x = np.array([1, -2, 300, -32768, 32767, 5, 6, 7, 8]).reshape(9, 1, 1)
    buf = pack_feature(x, lay)
    assert lay.channels_per_atom == 8 and lay.line_stride == 16 and lay.size == 32
    assert buf[:16].view("<i2").tolist() == [1, -2, 300, -32768, 32767, 5, 6, 7]
    assert buf[16:18].view("<i2").tolist() == [8]


@pytest.mark.parametrize("preset", PRESET_NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_feature_round_trip(preset, data):
    cfg = PRESETS[preset]
    c = data.draw(st.integers(1, 80))
    h = data.draw(st.integers(1, 6))
    w = data.draw(st.integers(1, 6))
    eb = data.draw(st.sampled_from([1, 2]))
    gap_l = data.draw(st.integers(0, 2)) * cfg.atom_size
    ls = w * cfg.atom_size * eb + gap_l  # an atom spans atom_size elements of eb bytes
    ss = h * ls + data.draw(st.integers(0, 2)) * cfg.atom_size
    lay = cube_layout(cfg, c, h, w, line_stride=ls, surf_stride=ss, elem_bytes=eb)
    lo, hi = (-128, 127) if eb == 1 else (-32768, 32767)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(lo, hi + 1, size=(c, h, w))
    assert np.array_equal(unpack_feature(pack_feature(x, lay), lay), x)


def _plain_weight_order(k, c, r, s, ak, ac):
    """Direct transcription of the format rule with explicit loops."""
    out = []
    for kg in range(0, k, ak):
        for cb in range(0, c, ac):
            for rr in range(r):
                for ss in range(s):
                    for kk in range(kg, min(kg + ak, k)):
                        for cc in range(cb, min(cb + ac, c)):
                            out.append((kk, cc, rr, ss))
    return out


@pytest.mark.parametrize("preset", ["nv_small", "nv_small_256", "nv_large"])
def test_dc_weight_layout_matches_plain_loops(preset):
    cfg = PRESETS[preset]
    k, c, r, s = cfg.atomic_k + 3, cfg.atomic_c + 5, 2, 3
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, size=(k, c, r, s)).astype(np.int8)
    buf = pack_dc_weights(w, cfg)
    expected = [w[i] for i in _plain_weight_order(k, c, r, s, cfg.atomic_k, cfg.atomic_c)]
    assert buf[: len(expected)].view(np.int8).tolist() == [int(v) for v in expected]
    assert buf.size % cfg.cbuf_entry_bytes == 0
    assert not buf[len(expected):].any()


@pytest.mark.parametrize("preset", PRESET_NAMES)
@settings(max_examples=20, deadline=None)
@given(k=st.integers(1, 40), c=st.integers(1, 70), r=st.integers(1, 3), s=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1))
def test_dc_weight_round_trip(preset, k, c, r, s, seed):
    cfg = PRESETS[preset]
    w = np.random.default_rng(seed).integers(-128, 128, size=(k, c, r, s)).astype(np.int8)
    assert np.array_equal(unpack_dc_weights(pack_dc_weights(w, cfg), w.shape, cfg), w)


def test_sdp_operand_interleaves_alu_then_mul():
    cfg = get_preset("nv_small")
    buf = pack_sdp_operand([1, 2, 3], cfg, elem_bytes=2, second=[-1, -2, -3])
    assert buf.size == 16
    assert buf[:12].view("<i2").tolist() == [1, -1, 2, -2, 3, -3]
    back = unpack_sdp_operand(buf, 3, elem_bytes=2, components=2)
    assert back.tolist() == [[1, -1], [2, -2], [3, -3]]


def test_sdp_operand_range_is_checked():
    with pytest.raises(ValueError, match="int8 range"):
        pack_sdp_operand([200], get_preset("nv_small"), elem_bytes=1)


def test_bad_strides_are_named():
    cfg = get_preset("nv_small")
    with pytest.raises(ValueError, match="line_stride=12 is not a multiple of the atom size 8"):
        cube_layout(cfg, 8, 2, 1, line_stride=12)
