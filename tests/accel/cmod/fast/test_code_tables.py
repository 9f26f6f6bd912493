"""The lookups of :mod:`accel.cmod.fast.code_tables` against a plain reading of the int16
entries: the output byte in bits 0-7, a saturation in bit 8, entry ``v + 128`` for the
int8 input ``v``, saturations counted in the first ``c`` channels only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.cmod.fast.code_tables import (
    ByteTable,
    _filled_counted,
    byte_table,
    channel_table_apply,
    table_apply,
)


def _entries(rng, shape, saturating: float) -> np.ndarray:
    """Random int16 entries: any output byte, bit 8 set on a ``saturating`` share."""
    out = rng.integers(0, 256, shape).astype(np.int16)
    return out | ((rng.random(shape) < saturating).astype(np.int16) << 8)


def _cube(rng, surfaces, h, w, atom, strided: bool) -> np.ndarray:
    """An int8 channel-packed cube ``[S, H, W, atom]`` holding every code, contiguous or
    a view with gaps between lines and surfaces (as the cubes in memory are)."""
    values = rng.integers(-128, 128, (surfaces, h, w, atom)).astype(np.int8)
    values.reshape(-1)[:256] = np.arange(-128, 128)[:values.size]
    if not strided:
        return values
    room = np.zeros((surfaces, h + 1, w + 3, atom), dtype=np.int8)
    view = room[:, 1:, 2:2 + w]
    view[:] = values
    return view


def _counted(sat: np.ndarray, c: int) -> int:
    """Saturations (``[S, H, W, atom]``) among the first ``c`` channels."""
    surfaces, _, _, atom = sat.shape
    lanes = np.arange(surfaces * atom).reshape(surfaces, 1, 1, atom) < c
    return int((sat & lanes).sum())


SHAPES = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 6),
                   st.sampled_from([8, 32]))
#: cubes of any shape, contiguous or not, with tables of no, few or only saturating entries
CASES = given(seed=st.integers(0, 2**32 - 1), shape=SHAPES,
              saturating=st.sampled_from([0, 0.02, 1]), strided=st.booleans(), data=st.data())


@settings(max_examples=80, deadline=None)
@CASES
def test_one_input_and_pairs_equal_the_entries(seed, shape, saturating, strided, data):
    rng = np.random.default_rng(seed)
    surfaces, h, w, atom = shape
    c = data.draw(st.integers(1, surfaces * atom))
    x = _cube(rng, *shape, strided)
    a = _cube(rng, *shape, not strided)
    one = _entries(rng, 256, saturating)
    want = one[x.astype(np.int32) + 128]
    got, sat = table_apply(x, None, byte_table(one), c)
    np.testing.assert_array_equal(got, (want & 0xFF).astype(np.uint8).view(np.int8))
    assert sat == _counted(want >> 8, c)

    pairs = _entries(rng, (256, 256), saturating)
    want = pairs[x.astype(np.int32) + 128, a.astype(np.int32) + 128]
    got, sat = table_apply(x, a, byte_table(pairs), c)
    np.testing.assert_array_equal(got, (want & 0xFF).astype(np.uint8).view(np.int8))
    assert sat == _counted(want >> 8, c)


@settings(max_examples=60, deadline=None)
@CASES
def test_channel_tables_equal_the_entries(seed, shape, saturating, strided, data):
    rng = np.random.default_rng(seed)
    surfaces, h, w, atom = shape
    c_pad = surfaces * atom
    c = data.draw(st.integers(1, c_pad))
    x = _cube(rng, *shape, strided)
    table = _entries(rng, (c_pad, 256), saturating)
    channel = np.arange(c_pad).reshape(surfaces, 1, 1, atom)
    want = table[channel, x.astype(np.int32) + 128]
    got, sat, counts = channel_table_apply(x, byte_table(table, per_channel=True), c)
    np.testing.assert_array_equal(got, (want & 0xFF).astype(np.uint8).view(np.int8))
    assert sat == _counted(want >> 8, c)
    assert not counts.any()


def test_saturations_count_in_the_first_channels_only():
    """Hand-counted: every entry saturates; 3 of 8 lanes count, on a 2x5 cube: 30."""
    table = np.full(256, 0x100 | 0x7F, dtype=np.int16)
    x = np.zeros((1, 2, 5, 8), dtype=np.int8)
    out, sat = table_apply(x, None, byte_table(table), 3)
    assert sat == 30 and (out == 127).all()
    out, sat = table_apply(x, x, byte_table(np.full((256, 256), 0x1FF, np.int16)), 3)
    assert sat == 30 and (out == -1).all()


def test_byte_table_indexes_by_the_raw_byte():
    """Entry v + 128 goes to byte v & 0xFF: -128 -> 0x80, -1 -> 0xFF, 0 -> 0, 127 -> 0x7F;
    a table without saturations has no flags to read."""
    entries = np.arange(256, dtype=np.int16)           # entry i holds the byte i
    table = byte_table(entries)
    assert isinstance(table, ByteTable) and table.saturates.size == 0
    for v in (-128, -1, 0, 127):
        assert table.out[v & 0xFF] == v + 128
    pairs = byte_table((np.arange(65536, dtype=np.int32) & 0xFF).astype(np.int16)
                       .reshape(256, 256))
    assert pairs.out[(0x80 << 8) | 0x05] == 5 + 128       # x = -128, a = 5


@pytest.mark.parametrize("per_channel", [False, True])
def test_tables_are_read_only(per_channel):
    table = byte_table(np.zeros((8, 256) if per_channel else 256, np.int16) | 0x100,
                       per_channel=per_channel)
    for array in table:
        with pytest.raises(ValueError):
            array[..., 0] = 1


def _constant_padding(rng, cube: np.ndarray, c: int) -> np.ndarray:
    """``cube`` with each lane past channel ``c`` holding one random value at every point
    (as the lanes an op pads its channels with most often are), written in place."""
    surfaces, _, _, atom = cube.shape
    for ch in range(c, surfaces * atom):
        cube[ch // atom, :, :, ch % atom] = rng.integers(-128, 128)
    return cube


def _counts(entries: np.ndarray) -> list[int]:
    """The LUT counters of int16 entries met: bit ``9 + j`` summed, for j = 0 .. 3."""
    return [int(((entries >> (9 + j)) & 1).sum()) for j in range(4)]


PADDED = given(seed=st.integers(0, 2**32 - 1), shape=SHAPES,
               saturating=st.sampled_from([0, 0.02, 1]), strided=st.booleans(),
               constant=st.booleans(), data=st.data())


@settings(max_examples=80, deadline=None)
@PADDED
def test_channel_tables_with_counters_equal_the_entries(seed, shape, saturating, strided,
                                                        constant, data):
    """A Y stage's table with LUT counter bits: the outputs, saturations and counts of a
    plain reading of every element, whether the lanes past channel ``c`` hold one value
    each (filled, not looked up) or not."""
    rng = np.random.default_rng(seed)
    surfaces, h, w, atom = shape
    c_pad = surfaces * atom
    c = data.draw(st.integers(1, c_pad))
    x = _cube(rng, *shape, strided)
    if constant:
        _constant_padding(rng, x, c)
    table = _entries(rng, (c_pad, 256), saturating)
    table |= rng.integers(0, 16, table.shape).astype(np.int16) << 9
    want = table[np.arange(c_pad).reshape(surfaces, 1, 1, atom), x.astype(np.int32) + 128]
    got, sat, counts = channel_table_apply(x, table, c)
    np.testing.assert_array_equal(got, (want & 0xFF).astype(np.uint8).view(np.int8))
    assert sat == _counted(want >> 8, c)
    assert counts.tolist() == _counts(want)
    if constant and c % atom and c > c_pad - atom:     # the padding lanes filled
        assert _filled_counted(x, table, c, np.empty_like(x), np.zeros(4, np.int64)) == sat


def test_filled_lanes_by_hand():
    """Past channel 3 of an 8-lane cube each lane holds its own value at every point:
    filled with their entries, counted once per point, the channels looked up (the
    plain reading's bytes, saturations and counts); one point off in lane 6 (the last
    point), None with the counts untouched; no lanes past the channels, or atoms that
    are not whole 64-bit words, None."""
    x = np.zeros((1, 2, 3, 8), dtype=np.int8)
    x[..., :3] = np.arange(6).reshape(2, 3, 1)
    x[..., 3:] = [-1, 0, 5, -128, 127]
    table = (np.arange(8 * 256).reshape(8, 256) % 509).astype(np.int16)
    table |= ((np.arange(8 * 256).reshape(8, 256) % 16) << 9).astype(np.int16)
    want = table[np.arange(8).reshape(1, 1, 1, 8), x.astype(np.int32) + 128]
    out, counts = np.empty_like(x), np.zeros(4, dtype=np.int64)
    assert _filled_counted(x, table, 3, out, counts) == _counted(want >> 8, 3)
    np.testing.assert_array_equal(out, (want & 0xFF).astype(np.uint8).view(np.int8))
    assert counts.tolist() == _counts(want)
    x[0, 1, 2, 6] = 0
    counts = np.zeros(4, dtype=np.int64)
    assert _filled_counted(x, table, 3, out, counts) is None and not counts.any()
    assert _filled_counted(x, table, 8, out, counts) is None
    assert _filled_counted(np.zeros((1, 2, 2, 4), np.int8), table[:4], 1,
                           np.empty((1, 2, 2, 4), np.int8), counts) is None
