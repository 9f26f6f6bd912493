"""CACC clip-truncate, SDP X1/X2 and the output converter in one compiled pass.

The numpy form of the datapath after the MAC array (:func:`accel.cmod.cacc.clip_truncate`,
:func:`accel.cmod.sdp.x_stage`, :func:`accel.cmod.sdp.convert_launches`) makes a
dozen passes over int64 arrays: each addition, multiplication, rounding shift and
saturation is its own.  :class:`PostProcess` does the same arithmetic element by
element in a loop compiled by numba, reading the GEMM's sums and writing int8,
so the data crosses memory once.  The compiler's usual program (32-bit sums, a
per-channel bias and multiplier in X1, X2 off) runs as one loop per channel
(:func:`_fused_channel`); the outputs are packed 8 channels to a 64-bit word.
The same program also runs on pixel-major sums (:meth:`PostProcess.run_pixels`:
a GEMM of pixels by kernels gives a pixel's channels side by side, as NVDLA's
channel packing holds them, and so do the channels-last depthwise loops for a
batch of operations, theirs side by side), and an element-wise sum of two int8
cubes is a lookup per element in a table of its arithmetic on every pair of
values (:func:`eltwise_packed`, a lookup of :mod:`accel.cmod.fast.code_tables`).

The rounding rule is the one of :func:`accel.arith.shift_round_int` (compiled
here), the operation order the one of the numpy form, which stays the
reference: the tests run both on the same operations, saturating and rounding
cases included, and compare every byte and counter.

A Y stage that is a LUT alone runs in the same pass through a table of the
LUT's result on every value the compiler scales its inputs into
(:class:`accel.cmod.fast.lut_y.YTable`); what the pass does not cover runs the
numpy form: a Y stage with an element-wise multiply or add, or a value outside
that table.
"""

from __future__ import annotations

import sys

import numpy as np

from accel.arith import shift_round_int
from accel.cmod import sdp_rdma
from accel.cmod.cube import planar
from accel.cmod.errors import ConfigError
from accel.cmod.fast import lut_y
from accel.cmod.fast.code_tables import (
    ByteTable,
    StagedTable,
    byte_table,
    staged_apply,
    table_apply,
)
from accel.cmod.sdp import ALU_MAX, ALU_MIN, ALU_SUM, MAX_SHIFT, alu_operand_shifted
from accel.jit import njit

_shift_round = njit(inline="always")(shift_round_int)

#: columns of the per-stage table :func:`_post` reads (one row per X stage)
BYPASS, ALU_BYPASS, ALGO, MUL_BYPASS, PRELU, RELU_BYPASS, SHIFT = range(7)
#: the row of an X stage that passes a 32-bit value on: ALU and multiplier bypassed, no ReLU
_IDENTITY_X = np.array([0, 1, ALU_SUM, 1, 0, 1, 0], dtype=np.int64)

_I32_LO, _I32_HI = -(1 << 31), (1 << 31) - 1
_P34_LO, _P34_HI = -(1 << 33), (1 << 33) - 1
_C17_LO, _C17_HI = -(1 << 16), (1 << 16) - 1
#: words of 8 channels put channel 8q + i in byte i (else channels go one at a time)
_LITTLE_ENDIAN = sys.byteorder == "little"


@njit(inline="always")
def _wide(x):
    """``x``, known to fit 32 bits, as int64 sign-extended from int32: a product of two
    of them compiles to one 32 x 32 -> 64-bit vector multiply, which AVX2 has (it has
    no 64 x 64-bit one)."""
    return np.int64(np.int32(x))


@njit(inline="always")
def _x_stage(row, st, alu, ia, sa, mul, im, sm):
    """One X stage (:func:`accel.cmod.sdp.x_stage`) on ``row``, the values of one channel
    (in place, int32 values on entry); ``st`` is its row of the stage table,
    ``alu[ia + p * sa]`` and ``mul[im + p * sm]`` the operands of point ``p`` (``sa``,
    ``sm``: 0 or 1; ALU operands fit int32, multipliers int16).

    An ALU sum followed by the multiplier is computed as ``row * mul + alu * mul``, every
    product one of two 32-bit values, so the values stay 32-bit up to the products."""
    if st[BYPASS]:
        return
    points, shift = row.shape[0], st[SHIFT]
    fold = (not st[ALU_BYPASS] and st[ALGO] == ALU_SUM and not st[MUL_BYPASS]
            and not st[PRELU])
    if not st[ALU_BYPASS] and not fold:
        algo = st[ALGO]
        if sa == 0:                       # one operand for the channel
            a = alu[ia]
            if algo == ALU_MAX:
                for p in range(points):
                    row[p] = max(row[p], a)
            elif algo == ALU_MIN:
                for p in range(points):
                    row[p] = min(row[p], a)
            else:
                for p in range(points):
                    row[p] += a
        elif algo == ALU_MAX:
            for p in range(points):
                row[p] = max(row[p], alu[ia + p])
        elif algo == ALU_MIN:
            for p in range(points):
                row[p] = min(row[p], alu[ia + p])
        else:
            for p in range(points):
                row[p] += alu[ia + p]
    if st[MUL_BYPASS]:
        for p in range(points):
            row[p] = min(max(_shift_round(row[p], shift), _I32_LO), _I32_HI)
    elif st[PRELU]:       # non-negative values pass unmultiplied and untruncated
        for p in range(points):
            v = row[p]
            scaled = _shift_round(v * mul[im + p * sm], shift)
            row[p] = min(max(scaled if v < 0 else v, _I32_LO), _I32_HI)
    elif fold and sa == 0 and sm == 0:   # one operand and one multiplier for the channel
        m = _wide(mul[im])
        am = _wide(alu[ia]) * m
        for p in range(points):
            row[p] = min(max(_shift_round(_wide(row[p]) * m + am, shift), _I32_LO), _I32_HI)
    elif fold:
        for p in range(points):
            m = _wide(mul[im + p * sm])
            v = _wide(row[p]) * m + _wide(alu[ia + p * sa]) * m
            row[p] = min(max(_shift_round(v, shift), _I32_LO), _I32_HI)
    elif sm == 0:                        # one multiplier for the channel (row: int32 still)
        m = _wide(mul[im])
        for p in range(points):
            row[p] = min(max(_shift_round(_wide(row[p]) * m, shift), _I32_LO), _I32_HI)
    else:
        for p in range(points):
            row[p] = min(max(_shift_round(_wide(row[p]) * _wide(mul[im + p]), shift),
                             _I32_LO), _I32_HI)
    if not st[RELU_BYPASS]:
        for p in range(points):
            row[p] = max(row[p], 0)


@njit(inline="always")
def _strides(op):
    """Element strides of an operand array ``[B, C, P]`` along each axis, 0 where it
    broadcasts (length 1)."""
    nb, nc, npts = op.shape
    return (nc * npts if nb > 1 else 0), (npts if nc > 1 else 0), (1 if npts > 1 else 0)


#: points of a channel processed at a time: the working rows of one atom of channels
#: stay in the L1/L2 caches
CHUNK = 4096


@njit(inline="always")
def _fusable(st, sa, sm):
    """Whether X stage ``st`` (its table row; ``sa``, ``sm``: its operands' point strides)
    is ``clip32(round_shift(x * m + a * m))`` with one ALU operand ``a`` and multiplier
    ``m`` per channel, optionally followed by ReLU: an ALU sum folded into the multiplier
    (:func:`_x_stage`), either half bypassed (``a`` 0 or ``m`` 1), not PReLU."""
    alu_ok = st[ALU_BYPASS] or (st[ALGO] == ALU_SUM and sa == 0)
    return not st[BYPASS] and alu_ok and (st[MUL_BYPASS] or (not st[PRELU] and sm == 0))


@njit(inline="always")
def _cvt(v, scale, offset_scaled, shift):
    """The output converter on a 32-bit value: ``round_shift((v - offset) * scale)``
    (``offset_scaled``: ``offset * scale``), before its saturation."""
    return _shift_round(_wide(v) * scale - offset_scaled, shift)


@njit(inline="always")
def _outside17(v):
    """1 for a converted value outside 17 bits (a saturation the converter counts)."""
    return (v < _C17_LO) | (v > _C17_HI)


@njit(inline="always")
def _x1(x, m, am, shift):
    """The X stage of :func:`_fusable` before its clips: ``round_shift(x * m + a * m)``
    (``am``: ``a * m``), ``x`` and ``m`` 32-bit (``m`` taken as such even when its type is
    int64, as the per-channel multipliers of :meth:`PostProcess._per_channel` are: one
    32 x 32 -> 64-bit multiply, where an int64 ``m`` would compile to the three of a
    64-bit one)."""
    return _shift_round(_wide(x) * _wide(m) + am, shift)


@njit(inline="always")
def _x_value(v, bypass, alu_bypass, algo, mul_bypass, prelu, relu_bypass, shift, a, m):
    """One X stage (:func:`accel.cmod.sdp.x_stage`: its fields as the stage table's row
    holds them, passed one by one so that a loop calling this with the same ones keeps
    them in registers) on one 32-bit value ``v``, with the ALU operand ``a`` (already
    shifted, 32-bit) and the multiplier ``m`` (16-bit)."""
    if bypass:
        return v
    if not alu_bypass:
        v = max(v, a) if algo == ALU_MAX else (min(v, a) if algo == ALU_MIN else v + a)
    if mul_bypass:
        v = _shift_round(v, shift)
    else:   # PReLU passes non-negative values untouched (a select: no branch on data)
        scaled = _shift_round(v * m, shift)
        v = v if prelu and v >= 0 else scaled
    v = min(max(v, _I32_LO), _I32_HI)
    return v if relu_bypass else max(v, 0)


#: the fields of :func:`_converted_lut`'s tallies: 12 bits each (a loop adding them up
#: takes them apart every :data:`_TALLY_BLOCK` values), from bit 0 the converter's
#: saturation, the LUT's underflow, overflow, LE hit and LO hit; bit 60 marks the two
#: entries for the values outside the table
_TALLY_BITS, _TALLY_BLOCK = 12, (1 << 12) - 1
_TALLY_MASK = (1 << _TALLY_BITS) - 1
_OUTSIDE_TABLE = np.int64(1) << 60


@njit(cache=True, nogil=True)
def _converted_lut(values, flags, offset, scale, shift, codes, tallies):
    """The Y stage's LUT table (``values``, ``flags``: :class:`~accel.cmod.fast.lut_y.YTable`)
    followed by the converter ``(offset, scale, shift)``, into ``codes`` (int8) and
    ``tallies`` (int64, the counter fields of :data:`_TALLY_BITS`), both of
    ``len(values) + 2`` entries: entry ``i + 1`` for the table's entry ``i``, the first
    and the last for the values below and above the table."""
    offset_scaled = offset * _wide(scale)
    for i in range(values.shape[0]):
        v = _cvt(values[i], _wide(scale), offset_scaled, shift)
        codes[i + 1] = min(max(v, -128), 127)
        tally = np.int64(_outside17(v))
        for bit in range(4):      # underflow, overflow, LE hit, LO hit
            tally |= np.int64((flags[i] >> bit) & 1) << (_TALLY_BITS * (bit + 1))
        tallies[i + 1] = tally
    for edge in (0, codes.shape[0] - 1):
        codes[edge] = 0
        tallies[edge] = _OUTSIDE_TABLE


@njit(inline="always")
def _lut_converted(sums, m, am, x_shift, lo, codes, tallies, conv, y_counts):
    """:func:`_fused_channel`'s loop through :func:`_converted_lut`'s tables: one lookup
    per value, of its byte and of its counter fields, which add up in one register (no
    branch on data: values outside the table meet the edge entries, checked after each
    block).  Returns the converter's saturation count, -1 when a value lies outside
    the table (``y_counts`` then as on entry)."""
    half, top = (codes.shape[0] - 2) // 2, codes.shape[0] - 1
    sums_of = np.zeros(5, dtype=np.int64)
    for first in range(0, conv.shape[0], _TALLY_BLOCK):
        total, seen = np.int64(0), np.int64(0)
        for p in range(first, min(first + _TALLY_BLOCK, conv.shape[0])):
            v = min(max(_x1(sums[p], m, am, x_shift), lo), _I32_HI)
            i = min(max(v + (half + 1), 0), top)
            tally = tallies[i]
            total += tally
            seen |= tally
            conv[p] = codes[i]
        if seen & _OUTSIDE_TABLE:
            return -1
        for j in range(5):
            sums_of[j] += (total >> (_TALLY_BITS * j)) & _TALLY_MASK
    for j in range(4):
        y_counts[j] += sums_of[j + 1]
    return sums_of[0]


@njit(inline="always")
def _table_row(r, codes, tallies, conv, counts):
    """:func:`_lut_converted`'s lookups of values ``r`` that have been through the X stages
    (int64, one row of the row-by-row pass) into ``conv``; their converter saturations
    and LUT counts added to ``counts`` (int64 ``[5]``, the order of the tally fields).
    False at a value outside the table."""
    half, top = (codes.shape[0] - 2) // 2, codes.shape[0] - 1
    for first in range(0, r.shape[0], _TALLY_BLOCK):
        total, seen = np.int64(0), np.int64(0)
        for p in range(first, min(first + _TALLY_BLOCK, r.shape[0])):
            i = min(max(r[p] + (half + 1), 0), top)
            tally = tallies[i]
            total += tally
            seen |= tally
            conv[p] = codes[i]
        if seen & _OUTSIDE_TABLE:
            return False
        for j in range(5):
            counts[j] += (total >> (_TALLY_BITS * j)) & _TALLY_MASK
    return True


@njit(inline="always")
def _fused_channel(sums, st, alu, ia, mul, im, offset, scale, shift, conv, y_values, y_flags,
                   y_half, y_counts, y_codes, y_tallies):
    """CACC (nothing to do: ``sums`` fit 32 bits, no truncate), a :func:`_fusable` X1
    stage (``alu[ia]``, ``mul[im]``), a bypassed X2, the Y stage's LUT when ``y_half``
    is not 0 (:func:`~accel.cmod.fast.lut_y.from_table`'s lookup, or when ``y_codes`` is
    not empty, the LUT and the converter as one lookup: :func:`_converted_lut`) and the
    converter on one channel in one loop,
    int8 results into ``conv``; returns the converter's saturation count, or -1 at the
    first value outside the LUT's table.

    The same arithmetic as the row-by-row path, shortened where it cannot change a
    result: after the converter's identity (offset 0, scale 1, shift 0), the int32
    clip is subsumed by the int8 one and does not move a value across the 17-bit
    bounds that the saturation count checks.  (An X2 stage in the same loop was
    tried: the row-by-row path, a vector loop per stage, is faster for it.)"""
    m = np.int64(1) if st[MUL_BYPASS] else _wide(mul[im])
    am = np.int64(0) if st[ALU_BYPASS] else _wide(alu[ia]) * m
    lo = 0 if not st[RELU_BYPASS] else _I32_LO
    x_shift = st[SHIFT]
    outside = 0
    if y_codes.shape[0]:
        return _lut_converted(sums, m, am, x_shift, lo, y_codes, y_tallies, conv, y_counts)
    if y_half:
        counts = (0, 0, 0, 0)
        offset_scaled = offset * scale
        for p in range(conv.shape[0]):
            i = min(max(_x1(sums[p], m, am, x_shift), lo), _I32_HI) + y_half
            if i < 0 or i >= 2 * y_half:
                return -1
            counts = lut_y.add_flags(y_flags[i], counts)
            v = _cvt(y_values[i], scale, offset_scaled, shift)
            outside += _outside17(v)
            conv[p] = min(max(v, -128), 127)
        for j in range(4):
            y_counts[j] += counts[j]
    elif offset == 0 and scale == 1 and shift == 0:
        for p in range(conv.shape[0]):
            v = max(_x1(sums[p], m, am, x_shift), lo)
            outside += _outside17(v)
            conv[p] = min(max(v, -128), 127)
    else:
        offset_scaled = offset * scale
        for p in range(conv.shape[0]):
            v = min(max(_x1(sums[p], m, am, x_shift), lo), _I32_HI)
            v = _cvt(v, scale, offset_scaled, shift)
            outside += _outside17(v)
            conv[p] = min(max(v, -128), 127)
    return outside


@njit(cache=True, nogil=True)
def _post_pixels(acc, m, am, counted, x_shift, lo, cvt, out, sats):
    """:func:`_fused_channel` over pixel-major sums ``acc`` (int32 ``[points, channels]``, a
    pixel's channels side by side, as a GEMM of pixels by kernels makes them) into
    ``out`` (int8 ``[channels / atom, points, atom]``, NVDLA's channel packing, which
    holds a pixel's channels side by side too).  Per channel: ``m`` the multiplier,
    ``am`` the ALU operand times it, ``counted`` 1 where the converter's saturations
    count; ``lo``: 0 for ReLU; ``sats[i]`` (zeros on entry): the saturation count of
    operation ``i``, whose channels are the ``channels / len(sats)`` from its first."""
    surfaces, points, atom = out.shape
    per_operation = surfaces // sats.shape[0]
    offset, scale, shift = cvt[0], _wide(cvt[1]), cvt[2]
    offset_scaled = offset * scale
    identity = offset == 0 and scale == 1 and shift == 0
    # indexed in place: a slice per pixel costs more than the pixel's arithmetic
    for s in range(surfaces):
        b = s * atom
        outside = 0
        if identity:
            for p in range(points):
                for j in range(atom):
                    v = max(_x1(acc[p, b + j], m[b + j], am[b + j], x_shift), lo)
                    outside += counted[b + j] & _outside17(v)
                    out[s, p, j] = min(max(v, -128), 127)
        else:
            for p in range(points):
                for j in range(atom):
                    v = min(max(_x1(acc[p, b + j], m[b + j], am[b + j], x_shift), lo),
                            _I32_HI)
                    v = _cvt(v, scale, offset_scaled, shift)
                    outside += counted[b + j] & _outside17(v)
                    out[s, p, j] = min(max(v, -128), 127)
        sats[s // per_operation] += outside


@njit(cache=True, nogil=True)
def _post_pixels_lut(acc, m, am, counted, x_shift, lo, x2, a2, m2, codes, tallies, out, sats,
                     y_counts):
    """:func:`_post_pixels` with an X2 stage of register operands (``x2``: its row of the
    stage table, ``a2`` its ALU operand shifted, ``m2`` its multiplier; bypassed or not)
    and a Y stage that is a LUT alone: X2's result looked up in :func:`_converted_lut`'s
    tables (``codes``, ``tallies``: the LUT and the converter as one lookup, with the
    converter's saturation and the LUT's counter bits), as :func:`_lut_converted` does
    channel by channel.  A pixel at a time: its channels' X stages in one loop (vector
    code), then their lookups.  The LUT's underflows, overflows, LE and LO hits of every
    value (the lanes past the kernels too, whose sums are the 0 disabled MAC cells
    deliver) are added to ``y_counts``; saturations count only where ``counted``.
    Returns 0, the outputs unfinished and ``y_counts`` as on entry, at a value outside
    the table; else 1."""
    surfaces, points, atom = out.shape
    channels = surfaces * atom
    half, top = (codes.shape[0] - 2) // 2, codes.shape[0] - 1
    bypass, alu_bypass, algo, mul_bypass = x2[BYPASS], x2[ALU_BYPASS], x2[ALGO], x2[MUL_BYPASS]
    prelu, relu_bypass, shift2 = x2[PRELU], x2[RELU_BYPASS], x2[SHIFT]
    index = np.empty(channels, dtype=np.int64)
    saturated = np.zeros(channels, dtype=np.int64)
    fields = np.zeros(4, dtype=np.int64)
    block = max(1, _TALLY_BLOCK // channels)    # points between two takings-apart
    for first in range(0, points, block):
        total, seen = np.int64(0), np.int64(0)
        for p in range(first, min(first + block, points)):
            row = acc[p]
            for ch in range(channels):
                v = min(max(_x1(row[ch], m[ch], am[ch], x_shift), lo), _I32_HI)
                v = _x_value(v, bypass, alu_bypass, algo, mul_bypass, prelu, relu_bypass,
                             shift2, a2, m2)
                index[ch] = min(max(v + (half + 1), 0), top)
            for s in range(surfaces):
                dst = out[s, p]
                for j in range(atom):
                    i = index[s * atom + j]
                    tally = tallies[i]
                    total += tally
                    seen |= tally
                    saturated[s * atom + j] += tally & 1   # field 0: one entry's saturation
                    dst[j] = codes[i]
        if seen & _OUTSIDE_TABLE:
            return 0
        for k in range(4):
            fields[k] += (total >> (_TALLY_BITS * (k + 1))) & _TALLY_MASK
    for k in range(4):
        y_counts[k] += fields[k]
    per_operation = channels // sats.shape[0]
    for ch in range(channels):
        sats[ch // per_operation] += counted[ch] * saturated[ch]
    return 1


#: channels per pixel (of all the operations side by side) from which
#: :meth:`PostProcess.run_pixels` takes :func:`_post_rows`: on fewer, the short row loops
#: cost more than the word moves save (measured on the 1x1 convolutions of mobilenet_v2
#: and yolox_nano: 0.95 against 1.15 ns per value from 64 channels, 1.3 against 1.15 on
#: 32)
ROW_CHANNELS = 64


@njit(inline="always")
def _operation_rows(acc, m, am, counted, x_shift, lo, cvt, rows, b, width):
    """:func:`_post_pixels`' arithmetic on channels ``b .. b + width`` of every pixel of
    ``acc`` into the same columns of ``rows`` (int8 ``[points, channels]``), each pixel's
    channels in one contiguous loop; returns the converter's saturation count."""
    offset, scale, shift = cvt[0], _wide(cvt[1]), cvt[2]
    offset_scaled = offset * scale
    mb, ab, cb = m[b:b + width], am[b:b + width], counted[b:b + width]
    outside = 0
    if offset == 0 and scale == 1 and shift == 0:
        for p in range(acc.shape[0]):
            src, dst = acc[p, b:b + width], rows[p, b:b + width]
            for j in range(width):
                v = max(_x1(src[j], mb[j], ab[j], x_shift), lo)
                outside += cb[j] & _outside17(v)
                dst[j] = min(max(v, -128), 127)
    else:
        for p in range(acc.shape[0]):
            src, dst = acc[p, b:b + width], rows[p, b:b + width]
            for j in range(width):
                v = min(max(_x1(src[j], mb[j], ab[j], x_shift), lo), _I32_HI)
                v = _cvt(v, scale, offset_scaled, shift)
                outside += cb[j] & _outside17(v)
                dst[j] = min(max(v, -128), 127)
    return outside


@njit(cache=True, nogil=True)
def _post_rows(acc, m, am, counted, x_shift, lo, cvt, words, sats):
    """:func:`_post_pixels` in two passes, for pixels of many channels: the values
    pixel-major as the sums are (each pixel's channels, of all the operations, in one
    loop that vectorizes), then their 64-bit words into the channel packing, ``words``
    (``out`` as uint64 ``[channels / atom, points, atom / 8]``).  The saturations are
    counted for all the operations at once, and again for each one only when there are
    any."""
    points, channels = acc.shape
    n = sats.shape[0]
    rows = np.empty((points, channels), dtype=np.int8)
    outside = _operation_rows(acc, m, am, counted, x_shift, lo, cvt, rows, 0, channels)
    if outside and n > 1:     # whose they are: each operation's channels again (rare)
        width = channels // n
        for i in range(n):
            sats[i] += _operation_rows(acc, m, am, counted, x_shift, lo, cvt, rows,
                                       i * width, width)
    else:
        sats[0] += outside
    surfaces, _, q = words.shape
    row_words = rows.view(np.uint64)
    for p in range(points):
        line = row_words[p]
        for s in range(surfaces):
            for k in range(q):
                words[s, p, k] = line[s * q + k]


@njit(cache=True, nogil=True)
def _eltwise_table(a_shift, m, x_shift, lo, cvt, table):
    """An SDP op reading memory whose X1 adds a per-element operand (``a``, an int8 value
    shifted left by ``a_shift`` and saturated to 32 bits, as
    :func:`accel.cmod.sdp.alu_operand_shifted`), then multiplies by ``m`` (1: bypassed)
    and rounds off ``x_shift`` bits, ReLU when ``lo`` is 0; X2 off; then the converter:
    for every pair of int8 values ``(x, a)``, ``table[x + 128, a + 128]`` (int16) holds
    the output byte in its low 8 bits and 1 in bit 8 when the converter saturates."""
    offset, scale, shift = cvt[0], _wide(cvt[1]), cvt[2]
    offset_scaled = offset * scale
    for xi in range(256):
        for ai in range(256):
            operand = min(max(np.int64(ai - 128) << a_shift, _I32_LO), _I32_HI)
            v = min(max(_x1(xi - 128, m, _wide(operand) * _wide(m), x_shift), lo), _I32_HI)
            v = _cvt(v, scale, offset_scaled, shift)
            table[xi, ai] = (min(max(v, -128), 127) & 0xFF) | (_outside17(v) << 8)


@njit(cache=True, nogil=True)
def _eltwise_channels(x, a, a_shift, m, x_shift, lo, st2, a2, m2, cvt, c, out):
    """:func:`_eltwise_table`'s op computed element by element, with an X2 stage ``st2``
    (its row of the stage table) after X1 that takes one ALU operand and multiplier per
    channel (``a2``, ``m2``, int64 ``[C_pad]``: PReLU's slopes after a residual sum),
    on ``x`` and ``a`` (int8 ``[S, H, W, atom]``, channel-packed, any strides) into
    ``out``; returns the saturation count among the first ``c`` channels."""
    surfaces, h, w, atom = out.shape
    offset, scale, shift = cvt[0], _wide(cvt[1]), cvt[2]
    offset_scaled = offset * scale
    bypass, alu_bypass, algo, mul_bypass = st2[BYPASS], st2[ALU_BYPASS], st2[ALGO], \
        st2[MUL_BYPASS]
    prelu, relu_bypass, shift2 = st2[PRELU], st2[RELU_BYPASS], st2[SHIFT]
    outside = 0
    for s in range(surfaces):
        counted = min(max(c - s * atom, 0), atom)
        lanes_a, lanes_m = a2[s * atom:(s + 1) * atom], m2[s * atom:(s + 1) * atom]
        for y in range(h):
            for p in range(w):
                for j in range(atom):
                    operand = min(max(np.int64(a[s, y, p, j]) << a_shift, _I32_LO), _I32_HI)
                    v = min(max(_x1(x[s, y, p, j], m, _wide(operand) * _wide(m), x_shift),
                                lo), _I32_HI)
                    v = _x_value(v, bypass, alu_bypass, algo, mul_bypass, prelu, relu_bypass,
                                 shift2, lanes_a[j], lanes_m[j])
                    v = _cvt(v, scale, offset_scaled, shift)
                    outside += (j < counted) & _outside17(v)
                    out[s, y, p, j] = min(max(v, -128), 127)
    return outside


@njit(cache=True, nogil=True)
def _x1_pairs(a_shift, m, x_shift, lo, values):
    """:func:`_eltwise_channels`' X1 (a sum, the multiplier, ReLU or not, the 32-bit clip)
    of every pair of int8 values, into ``values[x_byte << 8 | a_byte]`` (int64
    ``[65536]``, indexed by the raw bytes)."""
    for xb in range(256):
        x = xb - 256 if xb >= 128 else xb
        for ab in range(256):
            operand = min(max(np.int64(ab - 256 if ab >= 128 else ab) << a_shift, _I32_LO),
                          _I32_HI)
            values[(xb << 8) | ab] = min(max(_x1(x, m, _wide(operand) * _wide(m), x_shift),
                                             lo), _I32_HI)


@njit(cache=True, nogil=True)
def _x2_columns(first, st2, a2, m2, cvt, c, out, saturates):
    """:func:`_eltwise_channels`' X2 (``st2`` with channel ``ch``'s ``a2[ch]`` and
    ``m2[ch]``) and converter on each X1 result ``first + i`` of each channel:
    ``out[ch, i]`` the output byte, ``saturates[ch, i]`` 1 where the converter saturates
    in one of the first ``c`` channels."""
    offset, scale, shift = cvt[0], _wide(cvt[1]), cvt[2]
    offset_scaled = offset * scale
    for ch in range(out.shape[0]):
        for i in range(out.shape[1]):
            v = _x_value(first + i, st2[BYPASS], st2[ALU_BYPASS], st2[ALGO], st2[MUL_BYPASS],
                         st2[PRELU], st2[RELU_BYPASS], st2[SHIFT], a2[ch], m2[ch])
            v = _cvt(v, scale, offset_scaled, shift)
            out[ch, i] = min(max(v, -128), 127) & 0xFF
            saturates[ch, i] = (ch < c) & _outside17(v)


def stage_row(st) -> np.ndarray:
    """A :class:`~accel.cmod.sdp.StageConfig` as its row of the stage table the compiled
    passes read (columns :data:`BYPASS` ... :data:`SHIFT`); a ConfigError for an ALU
    algorithm the X stages do not have."""
    if not st.bypass and not st.alu_bypass and st.alu_algo not in (ALU_MAX, ALU_MIN, ALU_SUM):
        raise ConfigError("SDP", "D_DP_X_CFG", st.alu_algo, "ALU_ALGO must be MAX/MIN/SUM")
    return np.array([st.bypass, st.alu_bypass, st.alu_algo, st.mul_bypass, st.prelu,
                     st.relu_bypass, min(st.mul_shift, MAX_SHIFT)], dtype=np.int64)


#: :func:`_eltwise_table` of each X1 stage and converter met (a network has a few)
_TABLES: dict[tuple, ByteTable] = {}
_MAX_TABLES = 64          # 64 KiB each
#: :func:`_staged_table` of each X1 stage, X2 stage with its operands and converter met
#: (one per layer: each has its own PReLU slopes), None where X1's results span more than
#: :data:`STAGED_SPAN` values; emptied past :data:`_STAGED_BYTES` of tables
_STAGED: dict[tuple, StagedTable | None] = {}
STAGED_SPAN = 4096
_STAGED_BYTES = 32 << 20
_NO_SATURATES = np.zeros((0, 0), dtype=np.uint8)
_NO_SATURATES.flags.writeable = False


def _staged_table(key: tuple, m: int, lo: int, x2: tuple, c: int) -> StagedTable | None:
    """:func:`_eltwise_channels`' op as a :class:`~accel.cmod.fast.code_tables.StagedTable`:
    X1's result for each pair of values (``key``: :func:`eltwise_packed`'s), then X2 and
    the converter on each result in X1's span for each channel; None (kept too) when the
    span is wider than :data:`STAGED_SPAN`."""
    kept_key = (key, c, *(v.tobytes() for v in x2))
    if kept_key in _STAGED:
        return _STAGED[kept_key]
    values = np.empty(1 << 16, dtype=np.int64)
    _x1_pairs(key[0], m, key[2], lo, values)
    first, last = int(values.min()), int(values.max())
    table = None
    if last - first < STAGED_SPAN:
        row, a2, m2 = x2
        out = np.empty((a2.shape[0], last - first + 1), dtype=np.uint8)
        saturates = np.empty_like(out)
        _x2_columns(first, row, a2, m2, np.array(key[4:], dtype=np.int64), c, out, saturates)
        table = StagedTable((values - first).astype(np.uint16), out,
                            saturates if saturates.any() else _NO_SATURATES)
        for array in table:
            array.flags.writeable = False
    if sum(t.index.nbytes + 2 * t.out.nbytes for t in _STAGED.values() if t) > _STAGED_BYTES:
        _STAGED.clear()
    _STAGED[kept_key] = table
    return table


def eltwise_packed(x: np.ndarray, operand: np.ndarray, stage, cvt, c: int,
                   x2: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, int]:
    """An element-wise SDP op of one shape the compiler emits (:func:`eltwise_ready`
    ``stage``), from its input and ALU operand cubes channel-packed as memory holds them
    (int8 ``[C_pad / atom, H, W, atom]``, any strides): ``(int8 [C_pad / atom, H, W,
    atom], the converter's saturation count)``.  Both operands are int8, so the
    arithmetic of :func:`accel.cmod.sdp.x_stage` and the converter is computed once
    for each of the 65536 pairs of values (a table kept per stage and converter), and
    the op is a lookup per element.  ``x2``: an X2 stage after it that takes one ALU
    operand and multiplier per channel (:func:`stage_row`, int64 ``[C_pad]`` each,
    the ALU operands already shifted): the op then a lookup per element of X1's result
    for the pair, then of that result's output in the channel's table
    (:func:`_staged_table`), or where X1's results span too many values, computed element
    by element."""
    if operand.shape != x.shape or x.ndim != 4 or not eltwise_ready(stage):
        raise ValueError("eltwise_packed: not an element-wise sum of one operand cube")
    m = 1 if stage.mul_bypass else int(stage.mul_operand)
    lo = _I32_LO if stage.relu_bypass else 0
    key = (min(stage.alu_shift, 40), m, min(stage.mul_shift, MAX_SHIFT), lo,
           int(cvt[0]), int(cvt[1]), min(int(cvt[2]), MAX_SHIFT))
    if x2 is not None:
        staged = _staged_table(key, m, lo, x2, c)
        if staged is not None:
            return staged_apply(x, operand, staged)
        out = np.empty(x.shape, dtype=np.int8)
        sat = _eltwise_channels(x, operand, key[0], m, key[2], lo, *x2,
                                np.array(key[4:], dtype=np.int64), c, out)
        return out, int(sat)
    table = _TABLES.get(key)
    if table is None:
        entries = np.empty((256, 256), dtype=np.int16)
        _eltwise_table(key[0], m, key[2], lo, np.array(key[4:], dtype=np.int64), entries)
        if len(_TABLES) >= _MAX_TABLES:
            _TABLES.clear()
        table = _TABLES[key] = byte_table(entries)
    return table_apply(x, operand, table, c)


def eltwise_ready(stage) -> bool:
    """Whether X1 ``stage`` adds a per-element operand from memory (a sum, then the
    register multiplier or none, not PReLU): what :func:`eltwise_packed` computes."""
    return bool(not stage.bypass and not stage.alu_bypass and stage.alu_algo == ALU_SUM
                and stage.alu_src_mem
                and (stage.mul_bypass or (not stage.prelu and not stage.mul_src_mem)))


@njit(inline="always")
def _pack8(block, q, words):
    """``words[p]``: the 64-bit word of bytes ``block[8q .. 8q + 7, p]`` (uint8 ``[atom,
    count]``), little-endian as memory holds channels ``8q .. 8q + 7`` of point ``p``."""
    b0, b1, b2, b3 = block[8 * q], block[8 * q + 1], block[8 * q + 2], block[8 * q + 3]
    b4, b5, b6, b7 = block[8 * q + 4], block[8 * q + 5], block[8 * q + 6], block[8 * q + 7]
    for p in range(words.shape[0]):
        words[p] = (np.uint64(b0[p]) | (np.uint64(b1[p]) << 8) | (np.uint64(b2[p]) << 16)
                    | (np.uint64(b3[p]) << 24) | (np.uint64(b4[p]) << 32)
                    | (np.uint64(b5[p]) << 40) | (np.uint64(b6[p]) << 48)
                    | (np.uint64(b7[p]) << 56))


@njit(inline="always")
def _pack_atoms(block, count, out, first):
    """Write ``block[:, :count]`` (int8 ``[atom, chunk]``, a row per channel) to ``out``
    (int8 ``[points, atom]``) from point ``first``: NVDLA's channel packing, a 64-bit
    word of 8 channels at a time where ``atom`` allows."""
    atom = block.shape[0]
    if atom % 8 or not _LITTLE_ENDIAN:
        for p in range(count):
            for j in range(atom):
                out[first + p, j] = block[j, p]
        return
    u = block[:, :count].view(np.uint8)
    words = out.reshape(out.size).view(np.uint64)
    if atom == 8:                   # one word per point: a contiguous store
        _pack8(u, 0, words[first:first + count])
        return
    per_point = atom // 8
    grid = words.reshape(out.shape[0], per_point)
    for q in range(per_point):
        _pack8(u, q, grid[first:first + count, q])


@njit(cache=True, nogil=True)
def _post(acc, k, cacc, narrow, truncate, stages, alu0, mul0, alu1, mul1, cvt, c, out, sat,
          y_values, y_flags, y_counts, y_codes, y_tallies):
    """The pass of :meth:`PostProcess.run_packed`; with a Y stage that is a LUT alone
    (``y_values`` not empty), :func:`~accel.cmod.fast.lut_y.from_table`'s lookup then the
    converter, or with ``y_codes`` not empty (made with the converter of every
    operation) one lookup of :func:`_converted_lut`'s tables per value, on both the
    one-loop path and the row-by-row one (:func:`_table_row`).
    Returns 0, the outputs unfinished, at the first value outside the table; else 1."""
    n, surfaces, points, atom = out.shape
    st0, st1 = stages[0], stages[1]
    a0, m0, a1, m1 = alu0.ravel(), mul0.ravel(), alu1.ravel(), mul1.ravel()
    sa0, sm0, sa1, sm1 = _strides(alu0), _strides(mul0), _strides(alu1), _strides(mul1)
    y_half = y_values.shape[0] // 2
    # the common case in one loop per channel: 32-bit sums, a per-channel X1, no X2
    # a bypassed X1 hands 32-bit sums on unchanged, as the one loop's X1 does with neither
    # operand nor ReLU (its int32 clip holds them): the sums of a convolution whose SDP
    # only converts take that loop too
    fused_x1 = st0.copy()
    if st0[BYPASS]:
        fused_x1[:] = _IDENTITY_X
    fusable = cacc and narrow and _fusable(fused_x1, sa0[2], sm0[2]) and st1[BYPASS]
    per_channel = sa0[2] == 0 and sm0[2] == 0 and sa1[2] == 0 and sm1[2] == 0
    chunk = min(points, CHUNK)
    row = np.empty(chunk, dtype=np.int64)
    one = np.zeros(4, dtype=np.int64)
    five = np.zeros(5, dtype=np.int64)
    block = np.empty((atom, chunk), dtype=np.int8)
    for b in range(n):
        trunc = truncate[b if truncate.shape[0] > 1 else 0]
        line = b if cvt.shape[0] > 1 else 0
        offset, scale, shift = cvt[line, 0], _wide(cvt[line, 1]), cvt[line, 2]
        offset_scaled = offset * scale
        cacc_sat = 0
        cvt_sat = 0
        for surface in range(surfaces):
            for first in range(0, points, chunk):
                count = min(chunk, points - first)
                last = first + count
                for j in range(atom):
                    ch = surface * atom + j
                    converted = block[j, :count]
                    if fusable and trunc == 0 and ch < k:
                        outside = _fused_channel(
                            acc[b, ch, first:last], fused_x1, a0, b * sa0[0] + ch * sa0[1], m0,
                            b * sm0[0] + ch * sm0[1], offset, scale, shift, converted,
                            y_values, y_flags, y_half, y_counts, y_codes, y_tallies)
                        if outside < 0:
                            return 0
                        if ch < c:
                            cvt_sat += outside
                        continue
                    # a channel past the kernels with operands per channel: one value
                    r = row[:1] if ch >= k and per_channel else row[:count]
                    if ch >= k:
                        r[:] = 0                  # disabled MAC cells deliver 0
                    elif cacc and narrow and trunc == 0:  # int32 sums: nothing to clip, round
                        sums = acc[b, ch, first:last]
                        for p in range(count):
                            r[p] = np.int64(sums[p])
                    elif cacc:                    # 34-bit sums, clip-truncate, int32
                        sums = acc[b, ch, first:last]
                        for p in range(count):
                            v = _shift_round(min(max(np.int64(sums[p]), _P34_LO), _P34_HI),
                                             trunc)
                            cacc_sat += (v < _I32_LO) | (v > _I32_HI)
                            r[p] = min(max(v, _I32_LO), _I32_HI)
                    else:
                        r[:] = acc[b, ch, first:last]
                    _x_stage(r, st0, a0, b * sa0[0] + ch * sa0[1] + first * sa0[2], sa0[2],
                             m0, b * sm0[0] + ch * sm0[1] + first * sm0[2], sm0[2])
                    _x_stage(r, st1, a1, b * sa1[0] + ch * sa1[1] + first * sa1[2], sa1[2],
                             m1, b * sm1[0] + ch * sm1[1] + first * sm1[2], sm1[2])
                    if y_codes.shape[0]:      # the LUT and the converter as one table
                        five[:] = 0
                        if not _table_row(r, y_codes, y_tallies, converted, five):
                            return 0
                        times = count // r.shape[0]             # the one value: each point
                        y_counts += five[1:] * times
                        if r.shape[0] < count:
                            converted[1:] = converted[0]
                        if ch < c:
                            cvt_sat += five[0] * times
                        continue
                    if y_half:
                        one[:] = 0
                        if not lut_y.from_table(r, r, y_values, y_flags, one):
                            return 0
                        y_counts += one * (count // r.shape[0])   # the one value: each point
                    outside = 0
                    for p in range(r.shape[0]):   # a contiguous row: the loop runs as vector code
                        # (row - offset) * scale with the row (int32) times the 16-bit scale
                        v = _cvt(r[p], scale, offset_scaled, shift)
                        outside += _outside17(v)
                        converted[p] = min(max(v, -128), 127)
                    if r.shape[0] < count:
                        converted[1:] = converted[0]
                        outside *= count
                    if ch < c:
                        cvt_sat += outside
                _pack_atoms(block, count, out[b, surface], first)
        sat[b, 0] = cacc_sat
        sat[b, 1] = cvt_sat
    return 1


_NONE = np.zeros((1, 1, 1), dtype=np.int64)
_NONE.flags.writeable = False
#: no Y stage: :func:`_post`'s table and counter bits, empty
_NO_Y, _NO_FLAGS = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)
_NO_CODES, _NO_TALLIES = np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int64)


def _as_operand(op) -> np.ndarray:
    """An operand (int, or int64 ``[B or 1, C or 1, H or 1, W or 1]``: per launch, per
    channel or per element) as int64 ``[B or 1, C or 1, H*W or 1]``, read-only (one
    compiled form for every caller)."""
    a = np.asarray(op, dtype=np.int64)
    if a.ndim == 0:
        a = a.reshape(1, 1, 1, 1)
    a = a.reshape(a.shape[0], a.shape[1], a.shape[2] * a.shape[3])
    a.flags.writeable = False
    return a


def _per_launch(value) -> np.ndarray:
    """An int or per-launch int64 array as int64 ``[1 or B]``."""
    return np.asarray(value, dtype=np.int64).reshape(-1)


class PostProcess:
    """The datapath after the MAC array, set up for operations of one shape: CACC
    clip-truncate (optional), the SDP's X1 and X2 stages and the output converter.

    ``truncate``: CLIP_TRUNCATE, an int or int64 array along the batch; ``stages``:
    the two :class:`~accel.cmod.sdp.StageConfig`; ``operands``: per stage ``(alu, mul,
    alu already shifted)`` as :func:`accel.cmod.sdp.x_stage` takes them, with a
    leading batch axis on arrays; ``cvt``: ``(offset, scale, shift)``, ints or int64
    arrays along the batch; ``c``: the channels whose converter saturations count;
    ``shape``: the output's ``(C_pad, H, W)``, C_pad a multiple of ``atom``, the
    channels of one memory atom.  Set up once, run on every input.
    """

    def __init__(self, truncate, stages, operands, cvt, c: int,
                 shape: tuple[int, int, int], atom: int) -> None:
        table = np.zeros((2, 7), dtype=np.int64)
        ops: list[np.ndarray] = []
        for i, (st, (alu, mul, shifted)) in enumerate(zip(stages, operands, strict=True)):
            table[i] = stage_row(st)
            if st.bypass:
                ops += [_NONE, _NONE]
                continue
            if not st.alu_bypass and not shifted:
                alu = alu_operand_shifted(alu, st.alu_shift)
            ops += [_NONE if st.alu_bypass else _as_operand(alu),
                    _NONE if st.mul_bypass else _as_operand(mul)]
        rows = np.stack(np.broadcast_arrays(*(_per_launch(v) for v in cvt)), axis=1)
        rows[:, 2] = np.minimum(rows[:, 2], MAX_SHIFT)
        self._args = (_per_launch(truncate), table, *ops, rows, c)
        if shape[0] % atom:
            raise ValueError(f"PostProcess: {shape[0]} channels are not whole atoms of {atom}")
        self.shape, self.atom = shape, atom
        st0, st1 = stages
        per_channel = [op.shape[2] == 1 for op in ops[:2]]
        #: X1 as :meth:`run_pixels` takes it: a bypassed one as the stage that passes a
        #: 32-bit value on (no operands, no ReLU), as :func:`_post`'s one loop does
        self._x1_row = _IDENTITY_X if st0.bypass else table[0]
        #: operations of the compiler's usual program (see :func:`_fused_channel`), or a
        #: convolution whose SDP only converts, with one converter, which
        #: :meth:`run_pixels` takes as pixel-major sums
        x1_ready = bool(
            not self._args[0].any() and (rows == rows[0]).all()
            and (st0.bypass or (
                not (st0.prelu and not st0.mul_bypass)
                and (st0.alu_bypass or (st0.alu_algo == ALU_SUM and per_channel[0]))
                and (st0.mul_bypass or per_channel[1]))))
        self.pixels_ready = x1_ready and st1.bypass
        #: the same with a Y stage that is a LUT alone after it (:meth:`run_pixels_lut`),
        #: where X2 may also take one ALU operand and one multiplier from registers (a
        #: scale into the LUT's range)
        self.pixels_lut_ready = x1_ready and all(op.size == 1 for op in ops[2:])
        self._x2 = (table[1], int(ops[2].reshape(-1)[0]), int(ops[3].reshape(-1)[0]))
        self._channel_operands: dict[int, tuple[np.ndarray, ...]] = {}
        self._lut_codes: tuple | None = None

    def run_packed(self, acc: np.ndarray, cacc: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(int8 [B, C_pad / atom, H, W, atom], int64 [B, 2])``: the outputs in NVDLA's
        channel packing (:func:`accel.cmod.cube.write_packed_cube` writes them with whole
        atoms per pixel) and each operation's CACC and converter saturation counts.

        ``acc``: ``[B, K, H*W]`` exact sums of products (float32, int32 or int64),
        through CACC; or with ``cacc`` False, the SDP's input ``[B, C_pad, H*W]`` (int8
        or int64) from memory."""
        out, sat, _ = self._run(acc, cacc, _NO_Y, _NO_FLAGS, (_NO_CODES, _NO_TALLIES))
        return out, sat

    def run_lut(self, acc: np.ndarray, values: np.ndarray, flags: np.ndarray, cacc: bool = True
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """:meth:`run_packed` of operations whose Y stage is a LUT alone (no element-wise
        multiply or add), its lookup of every value of ``-len(values) / 2 ...`` in
        ``values`` (int64) with its counter bits in ``flags`` (int8: 1 underflow, 2
        overflow, 4 LE hit, 8 LO hit; :class:`accel.cmod.fast.lut_y.YTable`): ``(outputs,
        saturation counts, the LUT's underflows, overflows, LE hits and LO hits of all
        the operations)``, or None when a value reaching the LUT lies outside the
        table."""
        return self._run(acc, cacc, values, flags, self._converted_lut(values, flags))

    def _converted_lut(self, values: np.ndarray, flags: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_converted_lut`'s tables of a LUT table and this op's converter (empty
        when the operations have several converters), kept for the last table."""
        kept = self._lut_codes
        if kept is not None and kept[0] is values and kept[1] is flags:
            return kept[2]
        rows = self._args[-2]
        tables = (_NO_CODES, _NO_TALLIES)
        if (rows == rows[0]).all():
            tables = (np.empty(values.size + 2, np.int8), np.empty(values.size + 2, np.int64))
            _converted_lut(values, flags, *rows[0], *tables)
        self._lut_codes = (values, flags, tables)
        return tables

    def _run(self, acc: np.ndarray, cacc: bool, values: np.ndarray, flags: np.ndarray,
             converted: tuple[np.ndarray, np.ndarray]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        n = acc.shape[0]
        c_pad, h, w = self.shape
        out = np.empty((n, c_pad // self.atom, h * w, self.atom), dtype=np.int8)
        sat = np.zeros((n, 2), dtype=np.int64)
        counts = np.zeros(4, dtype=np.int64)
        truncate, table, a0, m0, a1, m1, rows, c = self._args
        # sums of at most 32 bits (the integer engine's, or exact float32 ones) need no
        # 34-bit clip, and without a truncate no rounding or int32 saturation either
        narrow = acc.dtype in (np.int32, np.float32, np.int16, np.int8)
        if not _post(acc, acc.shape[1], cacc, narrow, truncate, table, a0, m0, a1, m1, rows,
                     c, out, sat, values, flags, counts, *converted):
            return None
        return out.reshape(n, c_pad // self.atom, h, w, self.atom), sat, counts

    def run_pixels(self, acc: np.ndarray, out: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`run_packed` of :attr:`pixels_ready` operations from their sums as pixels:
        ``acc`` int32 ``[H*W, B * C_pad]``, the ``B`` operations' channels side by side,
        those past each one's kernels 0 (as disabled MAC cells deliver).  ``(int8 [B,
        C_pad / atom, H, W, atom], each one's converter saturation count)``; CACC
        saturates nothing (32-bit sums, no truncate).  ``out``: int8 ``[B * C_pad / atom,
        H*W, atom]`` (any strides, e.g. the output cube in memory) to write the outputs
        to, else a new array."""
        out, n = self._pixels_out(acc, out, self.pixels_ready)
        c_pad, h, w = self.shape
        m, am, counted = self._per_channel(n)
        sats = np.zeros(n, dtype=np.int64)
        x1, rows = self._x1_row, self._args[-2]
        lo = _I32_LO if x1[RELU_BYPASS] else 0
        words = self._words(out) if acc.shape[1] >= ROW_CHANNELS else None
        if words is not None:
            _post_rows(acc, m, am, counted, x1[SHIFT], lo, rows[0], words, sats)
        else:
            _post_pixels(acc, m, am, counted, x1[SHIFT], lo, rows[0], out, sats)
        return out.reshape(n, c_pad // self.atom, h, w, self.atom), sats

    def run_pixels_lut(self, acc: np.ndarray, values: np.ndarray, flags: np.ndarray,
                       out: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """:meth:`run_pixels` of operations whose Y stage is a LUT alone, as :meth:`run_lut`
        takes it (``values``, ``flags``): ``(outputs, each operation's converter saturation
        count, the LUT's underflows, overflows, LE hits and LO hits of all of them)``, or
        None when a value reaching the LUT lies outside the table (``out`` then partly
        written)."""
        codes, tallies = self._converted_lut(values, flags)
        if not codes.size:
            return None
        out, n = self._pixels_out(acc, out, self.pixels_lut_ready)
        m, am, counted = self._per_channel(n)
        sats, counts = np.zeros(n, dtype=np.int64), np.zeros(4, dtype=np.int64)
        x1 = self._x1_row
        lo = _I32_LO if x1[RELU_BYPASS] else 0
        if not _post_pixels_lut(acc, m, am, counted, x1[SHIFT], lo, *self._x2, codes, tallies,
                                out, sats, counts):
            return None
        c_pad, h, w = self.shape
        return out.reshape(n, c_pad // self.atom, h, w, self.atom), sats, counts

    def _pixels_out(self, acc: np.ndarray, out: np.ndarray | None, ready: bool
                    ) -> tuple[np.ndarray, int]:
        """``(out, n)``: the outputs of :meth:`run_pixels` on the sums ``acc`` of ``n``
        operations (``out`` checked, or a new array), after checking the sums and that the
        operations are ``ready`` (:attr:`pixels_ready`, :attr:`pixels_lut_ready`)."""
        if not ready:
            raise ValueError("PostProcess.run_pixels: not operations of a per-channel (or "
                             "bypassed) X1 program without truncate, with one converter")
        c_pad, h, w = self.shape
        if (acc.dtype != np.int32 or acc.ndim != 2 or acc.shape[0] != h * w
                or acc.shape[1] % c_pad or not acc.shape[1]):
            raise ValueError(f"PostProcess.run_pixels: sums {acc.shape} {acc.dtype}, need "
                             f"int32 ({h * w}, a multiple of {c_pad})")
        n = acc.shape[1] // c_pad
        shape = (n * c_pad // self.atom, h * w, self.atom)
        if out is None:
            out = np.empty(shape, dtype=np.int8)
        elif out.shape != shape or out.dtype != np.int8:
            raise ValueError(f"PostProcess.run_pixels: outputs {out.shape} {out.dtype}, need "
                             f"int8 {shape}")
        return out, n

    def _words(self, out: np.ndarray) -> np.ndarray | None:
        """``out`` (int8 ``[S, points, atom]``) as uint64 ``[S, points, atom / 8]``, a view;
        None when its atoms are not whole aligned words."""
        if self.atom % 8 or out.strides[-1] != 1:
            return None
        words = out.view(np.uint64)
        return words if words.flags.aligned else None

    def _per_channel(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """int64 ``[n * C_pad]`` each, for :func:`_post_pixels` on ``n`` operations: X1's
        multiplier, its ALU operand times the multiplier (both as 32-bit values, as
        :func:`_wide` takes them), 1 where the converter's saturations count."""
        got = self._channel_operands.get(n)
        if got is not None:
            return got
        c_pad = self.shape[0]
        x1, a0, m0, c = self._x1_row, self._args[2], self._args[3], self._args[-1]
        for op in (a0, m0):
            if op.shape[0] not in (1, n):
                raise ValueError(f"PostProcess.run_pixels: {n} operations' sums for operands "
                                 f"of {op.shape[0]}")

        def spread(op: np.ndarray) -> np.ndarray:     # [1 or n, 1 or C_pad, 1] -> [n * C_pad]
            lanes = np.broadcast_to(op[:, :c_pad, 0], (n, c_pad))
            return lanes.astype(np.int32).astype(np.int64).ravel()

        m = np.ones(n * c_pad, np.int64) if x1[MUL_BYPASS] else spread(m0)
        am = np.zeros(n * c_pad, np.int64) if x1[ALU_BYPASS] else spread(a0) * m
        counted = (np.arange(n * c_pad) % c_pad < c).astype(np.int64)
        got = self._channel_operands[n] = (m, am, counted)
        return got

    def run(self, acc: np.ndarray, cacc: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`run_packed` with the outputs as planes, int8 ``[B, C_pad, H, W]``."""
        packed, sat = self.run_packed(acc, cacc)
        return planar(packed), sat



def for_plan(plan, truncate: int, dram, atom: int) -> PostProcess:
    """A :class:`PostProcess` for one SDP op (an :class:`~accel.cmod.sdp.SdpPlan` without a
    Y stage) fed by a convolution with CLIP_TRUNCATE ``truncate`` (ignored for an op
    reading memory), its memory operands as ``dram`` holds them now, its output packed
    in atoms of ``atom`` channels."""
    operands = []
    for st, reads in plan.stages:
        alu, mul, shifted = st.alu_operand, st.mul_operand, False
        if reads is not None and not st.bypass:
            got = reads.read(dram)
            if st.alu_src_mem and sdp_rdma.USE_ALU in got:
                alu, shifted = reads.alu_shifted(dram, st.alu_shift)[None], True
            if st.mul_src_mem and sdp_rdma.USE_MUL in got:
                mul = got[sdp_rdma.USE_MUL][None]
        operands.append((alu, mul, shifted))
    return PostProcess(truncate, [st for st, _ in plan.stages], operands, plan.cvt, plan.c,
                       (plan.c_pad, plan.h, plan.w), atom)
