"""Operations on int8 cubes that are a table lookup per element.

An SDP op whose result depends only on its int8 input (and on one int8 operand
per element or per channel) has at most 256 (or 65536) distinct results: the
plain model's arithmetic computes them once into a table of int16 entries, the
output byte in the low 8 bits and 1 in bit 8 where the converter saturates
(:func:`accel.cmod.fast.fused._eltwise_table`, the code tables of
:mod:`accel.cmod.fast.paths`), entry ``v + 128`` for the input ``v``.

The lookups here take that table as a :class:`ByteTable`: its output bytes and
its saturation flags apart, each indexed by the input's raw byte (``v & 0xFF``,
the entries turned by half the table), so that an element costs one byte load
and one store, and the flags are read only when some entry saturates.  That
ran the lookups of a 12x100x76x8 cube 2.9x (one input) and 3.1x (pairs) faster
than a loop over the int16 entries that unpacked every one (measured
2026-12-05, one thread).  A table of pairs with flags is also kept as 16-bit
entries, the byte and the flag in one (:attr:`ByteTable.flagged`): its 64 KiB of
bytes and 64 KiB of flags were two loads from a table the size of the L2 cache
per element, and one load of both ran 1.8-2.3x faster (8-channel cubes of
16x16 to 128x128, 1 % of the pairs saturating; measured 2026-12-06).  A lookup
that also sums a Y stage's LUT counters reads the int16 entries, which hold those
bits too (:func:`channel_table_apply` with ``lut``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from accel.jit import njit

#: an empty flags array: no entry of the table saturates
NO_FLAGS = np.zeros(0, dtype=np.uint8)
NO_FLAGS.flags.writeable = False


class ByteTable(NamedTuple):
    """A code table as the lookups take it (see the module docstring): ``out`` the output
    bytes (uint8), ``saturates`` 1 where the converter saturates (uint8, the same
    shape; empty when no entry does).  One input: ``[256]``; pairs: ``[65536]``, entry
    ``x_byte << 8 | a_byte``; a table per channel: ``[C_pad, 256]``."""

    out: np.ndarray
    saturates: np.ndarray
    #: a table of pairs whose entries saturate: ``out | saturates << 8`` (uint16), which
    #: :func:`_lookup_pairs` reads in one load; else empty
    flagged: np.ndarray = NO_FLAGS


def byte_table(entries: np.ndarray, per_channel: bool = False) -> ByteTable:
    """The :class:`ByteTable` of int16 ``entries``: ``[256]`` (entry ``v + 128``), ``[256,
    256]`` (entry ``[x + 128, a + 128]``) or, with ``per_channel``, ``[C_pad, 256]``."""
    axes = (-1,) if per_channel else tuple(range(entries.ndim))
    # entry v + 128 to the raw byte v & 0xFF: (v & 0xFF) == (v + 128) ^ 0x80, a turn by 128
    turned = np.roll(entries, 128, axis=axes)
    if not per_channel:
        turned = turned.reshape(-1)
    out = np.ascontiguousarray(turned & 0xFF, dtype=np.uint8)
    saturates = ((turned >> 8) & 1).astype(np.uint8)
    if not saturates.any():
        saturates = NO_FLAGS if not per_channel else NO_FLAGS.reshape(0, 0)
    flagged = NO_FLAGS
    if entries.ndim == 2 and not per_channel and saturates.size:
        flagged = out.astype(np.uint16) | (saturates.astype(np.uint16) << 8)
    for array in (out, saturates, flagged):
        array.flags.writeable = False
    return ByteTable(out, saturates, flagged)


@njit(cache=True, nogil=True)
def _lookup(x, table, saturates, c, out):
    """``out`` = ``table[x]`` over a cube (uint8 ``[S, H, W, atom]``, the int8 bytes,
    channel-packed, any strides); returns how many of the first ``c`` channels' entries
    saturate (0 without ``saturates``)."""
    surfaces, h, w, atom = out.shape
    outside = 0
    for s in range(surfaces):
        counted = min(max(c - s * atom, 0), atom)      # lanes of this surface that count
        for y in range(h):
            xs, dst = x[s, y], out[s, y]
            if saturates.shape[0] == 0 or counted == 0:
                for p in range(w):
                    for j in range(atom):
                        dst[p, j] = table[xs[p, j]]
            else:
                for p in range(w):
                    for j in range(atom):
                        v = xs[p, j]
                        dst[p, j] = table[v]
                        outside += (j < counted) & saturates[v]
    return outside


@njit(cache=True, nogil=True)
def _lookup_pairs(x, a, table, flagged, c, out):
    """:func:`_lookup` of a table of pairs, ``table[x << 8 | a]``, or of its entries
    with their flags, ``flagged`` (:attr:`ByteTable.flagged`), when not empty."""
    surfaces, h, w, atom = out.shape
    outside = 0
    for s in range(surfaces):
        counted = min(max(c - s * atom, 0), atom)
        for y in range(h):
            xs, as_, dst = x[s, y], a[s, y], out[s, y]
            if flagged.shape[0] == 0 or counted == 0:
                for p in range(w):
                    for j in range(atom):
                        dst[p, j] = table[(np.int32(xs[p, j]) << 8) | as_[p, j]]
            elif counted == atom:
                for p in range(w):
                    for j in range(atom):
                        v = flagged[(np.int32(xs[p, j]) << 8) | as_[p, j]]
                        dst[p, j] = v
                        outside += v >> 8
            else:
                for p in range(w):
                    for j in range(atom):
                        v = flagged[(np.int32(xs[p, j]) << 8) | as_[p, j]]
                        dst[p, j] = v
                        outside += (j < counted) & (v >> 8)
    return outside


@njit(cache=True, nogil=True)
def _lookup_channels(x, table, saturates, c, out):
    """:func:`_lookup` with a table per channel, ``table[channel, x]``."""
    surfaces, h, w, atom = out.shape
    outside = 0
    for s in range(surfaces):
        counted = min(max(c - s * atom, 0), atom)
        lanes = table[s * atom:(s + 1) * atom]
        for y in range(h):
            xs, dst = x[s, y], out[s, y]
            if saturates.shape[0] == 0 or counted == 0:
                for p in range(w):
                    for j in range(atom):
                        dst[p, j] = lanes[j, xs[p, j]]
            else:
                flags = saturates[s * atom:(s + 1) * atom]
                for p in range(w):
                    for j in range(atom):
                        v = xs[p, j]
                        dst[p, j] = lanes[j, v]
                        outside += (j < counted) & flags[j, v]
    return outside


@njit(inline="always")
def _field_increments():
    """uint64 ``[16]``: for each 4 LUT counter bits of an entry (underflow, overflow, LE
    hit, LO hit), what adds 1 to each of their 16-bit fields of one sum."""
    packed = np.zeros(16, dtype=np.uint64)
    for f in range(16):
        for j in range(4):
            packed[f] |= np.uint64((f >> j) & 1) << np.uint64(16 * j)
    return packed


@njit(cache=True, nogil=True)
def _channel_table_counted(x, table, c, out, counts):
    """A lookup in int16 entries per channel (``table[ch, v + 128]`` for the int8 input
    ``v``, the output byte, 1 in bit 8 where the converter saturates) whose entries also
    hold the Y stage's LUT counter bits from bit 9
    (:func:`~accel.cmod.fast.lut_y.add_flags`' order), summed over every element into
    ``counts`` (int64 ``[4]``): the four counts are 16-bit fields of one sum (a lookup
    and an add per element), emptied before a field can carry.  Returns the saturation
    count among the first ``c`` channels."""
    surfaces, h, w, atom = out.shape
    packed = _field_increments()
    block = max(1, 0xFFFF // atom)               # points summed before the fields empty
    outside = 0
    for s in range(surfaces):
        counted = min(max(c - s * atom, 0), atom)
        lanes = table[s * atom:(s + 1) * atom]
        for y in range(h):
            for first in range(0, w, block):
                fields = np.uint64(0)
                for p in range(first, min(first + block, w)):
                    for j in range(atom):
                        t = lanes[j, np.int32(x[s, y, p, j]) + 128]
                        out[s, y, p, j] = np.int8(t & 0xFF)
                        outside += (j < counted) & ((t >> 8) & 1)
                        fields += packed[(t >> 9) & 15]
                for j in range(4):
                    counts[j] += np.int64((fields >> np.uint64(16 * j)) & np.uint64(0xFFFF))
    return outside


class StagedTable(NamedTuple):
    """An op of two int8 cubes whose first stage depends on the pair of values and whose
    rest depends on that stage's result and the channel: ``index`` (uint16 ``[65536]``,
    entry ``x_byte << 8 | a_byte``) the first stage's result as a column of ``out``
    (uint8 ``[C_pad, columns]``, each channel's output bytes), ``saturates`` 1 where
    the converter saturates in a channel whose saturations count (the same shape;
    empty when none does)."""

    index: np.ndarray
    out: np.ndarray
    saturates: np.ndarray


@njit(cache=True, nogil=True)
def _lookup_staged(x, a, index, table, saturates, out):
    """``out`` = ``table[channel, index[x << 8 | a]]`` over two cubes (uint8 ``[S, H, W,
    atom]``, the int8 bytes, channel-packed, any strides); returns how many entries met
    saturate (0 without ``saturates``)."""
    surfaces, h, w, atom = out.shape
    outside = 0
    for s in range(surfaces):
        lanes = table[s * atom:(s + 1) * atom]
        for y in range(h):
            xs, as_, dst = x[s, y], a[s, y], out[s, y]
            if saturates.shape[0] == 0:
                for p in range(w):
                    for j in range(atom):
                        dst[p, j] = lanes[j, index[(np.int32(xs[p, j]) << 8) | as_[p, j]]]
            else:
                flags = saturates[s * atom:(s + 1) * atom]
                for p in range(w):
                    for j in range(atom):
                        i = index[(np.int32(xs[p, j]) << 8) | as_[p, j]]
                        dst[p, j] = lanes[j, i]
                        outside += flags[j, i]
    return outside


@njit(cache=True, nogil=True)
def _surface_filled(x, words, table, ref, mask, fill, out, out_words, counts):
    """The part-filled surface of :func:`_filled_counted` in one pass: each point's atom
    (``x`` uint8 ``[H, W, atom]``, ``words`` the same as 64-bit words, any strides)
    compared with ``ref`` under ``mask`` (the padding lanes) and written as ``fill``
    (those lanes' results), then its first ``len(table)`` lanes looked up in ``table``
    (int16 entries per lane, :func:`_channel_table_counted`'s) into ``out``, their LUT
    counter fields added to ``counts``.  Returns their saturation count, or -1 at the
    first line where a padding lane differs (``out`` and ``counts`` then unfinished)."""
    h, w, q = words.shape
    live = table.shape[0]
    packed = _field_increments()
    block = max(1, 0xFFFF // live)               # points summed before the fields empty
    outside = 0
    for y in range(h):
        diff = np.uint64(0)
        for first in range(0, w, block):
            fields = np.uint64(0)
            for p in range(first, min(first + block, w)):
                for k in range(q):
                    diff |= (words[y, p, k] ^ ref[k]) & mask[k]
                    out_words[y, p, k] = fill[k]
                for j in range(live):
                    t = table[j, np.int32(x[y, p, j]) ^ 0x80]
                    out[y, p, j] = t & 0xFF
                    outside += (t >> 8) & 1
                    fields += packed[(t >> 9) & 15]
            for j in range(4):
                counts[j] += np.int64((fields >> np.uint64(16 * j)) & np.uint64(0xFFFF))
        if diff:
            return -1
    return outside


def _filled_counted(x: np.ndarray, table: np.ndarray, c: int, out: np.ndarray,
                    counts: np.ndarray) -> int | None:
    """:func:`_channel_table_counted` of a cube whose lanes past channel ``c`` each hold
    one value at every point (the value of its first point): those lanes filled with
    their results and their counter bits counted once per point, the channels' lanes
    looked up; the saturation count, or None (``out`` unfinished, ``counts`` as on
    entry) when a padding lane holds two values, the cube has surfaces past the one
    ``c`` ends in (an op's cube has none), or its atoms are not whole 64-bit words of
    adjacent bytes (no preset has those).

    Channels padded to whole atoms (a 1-channel map on nv_large's 32-lane atoms) hold in
    the lanes past the last channel what the op before wrote there: most often one value
    a lane (the disabled MAC cells' sums of 0 through its SDP, a copy of those).  The
    surface they lie in is read and written once, its atoms as words: compared with the
    first point's under a mask of those lanes and written with their results, then the
    channels' lanes looked up (:func:`_surface_filled`)."""
    surfaces, h, w, atom = x.shape
    first, live = divmod(c, atom)
    if not live or first != surfaces - 1 or atom % 8 or x.strides[3] != 1 or not x.size:
        return None
    surface, dst = x[first].view(np.uint8), out[first].view(np.uint8)
    ref = np.ascontiguousarray(surface[0, 0])
    entries = table[first * atom + np.arange(live, atom), ref[live:] ^ 0x80]
    mask = np.where(np.arange(atom) >= live, 0xFF, 0).astype(np.uint8)
    fill = np.zeros(atom, dtype=np.uint8)
    fill[live:] = entries & 0xFF
    found = np.zeros(4, dtype=np.int64)
    sat = _surface_filled(surface, surface.view(np.uint64), table[first * atom:c],
                          ref.view(np.uint64), mask.view(np.uint64), fill.view(np.uint64),
                          dst, dst.view(np.uint64), found)
    if sat < 0:
        return None
    for j in range(4):                           # each padding lane's bits, at every point
        found[j] += h * w * int(((entries >> (9 + j)) & 1).sum())
    if first:
        sat += _channel_table_counted(x[:first], table[:first * atom], first * atom,
                                      out[:first], found)
    counts += found
    return int(sat)


def table_apply(x: np.ndarray, a: np.ndarray | None, table: ByteTable, c: int
                ) -> tuple[np.ndarray, int]:
    """``(int8 out, saturations among the first c channels)`` of an op that is a function
    of the int8 cube ``x`` (and of the int8 cube ``a``; both ``[S, H, W, atom]``, any
    strides) given by ``table`` (:func:`byte_table` of one input's or of pairs')."""
    out = np.empty(x.shape, dtype=np.int8)
    raw = out.view(np.uint8)
    if a is None:
        return out, int(_lookup(x.view(np.uint8), table.out, table.saturates, c, raw))
    return out, int(_lookup_pairs(x.view(np.uint8), a.view(np.uint8), table.out, table.flagged,
                                  c, raw))


def staged_apply(x: np.ndarray, a: np.ndarray, table: StagedTable) -> tuple[np.ndarray, int]:
    """``(int8 out, saturations)`` of an op of the int8 cubes ``x`` and ``a`` (both ``[S,
    H, W, atom]``, any strides) given by a :class:`StagedTable`."""
    out = np.empty(x.shape, dtype=np.int8)
    sat = _lookup_staged(x.view(np.uint8), a.view(np.uint8), *table, out.view(np.uint8))
    return out, int(sat)


#: the share of a cube's lanes past its channels from which :func:`channel_table_apply`
#: fills them (:func:`_filled_counted`, one pass over the part-filled surface) rather than
#: looking them up, when each holds one value.  Against the lookup of every lane
#: (:func:`_channel_table_counted`), on one surface with one value in each padding lane:
#: 16 of 32 live lanes 0.70x the time, 20 of 32 0.77x, 24 of 32 0.87x, 4 of 8 0.87x, 6 of
#: 8 1.12x (2026-12-06); a quarter of the lanes pays on 32-lane atoms only, half on both
FILL_PADDING_SHARE = 0.5


def channel_table_apply(x: np.ndarray, table: ByteTable | np.ndarray, c: int
                        ) -> tuple[np.ndarray, int, np.ndarray]:
    """``(int8 out, saturations among the first c channels, LUT counts)`` of an op that is
    a function of each channel's int8 input (``x`` int8 ``[S, H, W, atom]``, any
    strides): ``table`` a per-channel :class:`ByteTable` (the counts are then 0), or
    int16 entries ``[C_pad, 256]`` holding a Y stage's LUT counter bits too, whose counts
    (under- and overflows, LE and LO hits) are summed (:func:`_channel_table_counted`).
    With counters, when at least half the lanes lie past channel ``c`` and each holds
    one value, those are filled with its result and their counter bits counted once per
    point (:func:`_filled_counted`, :data:`FILL_PADDING_SHARE`)."""
    out = np.empty(x.shape, dtype=np.int8)
    counts = np.zeros(4, dtype=np.int64)
    if isinstance(table, ByteTable):
        return out, int(_lookup_channels(x.view(np.uint8), table.out, table.saturates, c,
                                         out.view(np.uint8))), \
            counts
    c_pad = x.shape[0] * x.shape[3]
    if c_pad - c >= c_pad * FILL_PADDING_SHARE:
        sat = _filled_counted(x, table, c, out, counts)
        if sat is not None:
            return out, sat, counts
    return out, int(_channel_table_counted(x, table, c, out, counts)), counts
