"""The one check of inputs that are about to be quantized to int8.

int8 turns any float into one of 256 codes without complaint: a NaN or an
infinity becomes a confident number, and an input far outside the range it was
calibrated for becomes a wall of -128/127.  Every int8 path (``run`` on the CPU
or the DLA, ``compare``, ``eval``, ``quantize``) goes through
:func:`check_int8_inputs` (:func:`check_int8_samples` for a calibration set), so they
refuse and warn alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tengine_host.errors import TengineInputError
from tengine_host.quant.calibrate import CLIP_WARN
from tengine_host.quant.table import scale_of, zero_point_of
from tengine_host.quant.weights import round_half_away

#: an input with more than this share of its values outside the int8 range of its
#: calibration scale warns: the share calibration itself may clip before it warns
SATURATION_WARN = CLIP_WARN


def saturated_share(x: np.ndarray, scale: float, zero_point: int = 0) -> float:
    """The share of ``x``'s values that quantize outside [-128, 127] with ``scale`` and
    ``zero_point`` (and are clamped there), by the hardware's rounding rule."""
    x = np.asarray(x, dtype=np.float64)
    if not x.size:
        return 0.0
    with np.errstate(over="ignore"):
        q = round_half_away(x / scale) + zero_point
    return float(np.count_nonzero((q < -128) | (q > 127))) / x.size


def check_int8_inputs(feeds: Mapping[str, np.ndarray], table=None,
                      where: str = "int8 inference") -> list[str]:
    """Refuse ``feeds`` holding NaN or Inf; return a warning for each input that ``table``
    (a :class:`~tengine_host.quant.table.QuantTable` or a plain mapping; None before
    there is one) saturates in more than :data:`SATURATION_WARN` of its values.

    ``where`` names the path in the messages (e.g. ``"--precision int8"``).  Integer
    inputs are not quantized and pass unchecked.
    """
    return check_int8_samples([feeds], table, where)


def check_int8_samples(samples: Sequence[Mapping[str, np.ndarray]], table=None,
                       where: str = "int8 inference") -> list[str]:
    """:func:`check_int8_inputs` over several samples (calibration's): NaN/Inf refused
    naming the sample, one warning per input for the share saturated over all of them."""
    counts: dict[str, list] = {}        # input -> [saturated, values, lo, hi]
    for i, feeds in enumerate(samples):
        for name, value in feeds.items():
            v = np.asarray(value)
            if not np.issubdtype(v.dtype, np.floating):
                continue
            bad = v.size - int(np.count_nonzero(np.isfinite(v)))
            if bad:
                sample = f" (sample {i})" if len(samples) > 1 else ""
                raise TengineInputError(f"input {name!r}{sample} has {bad} NaN/Inf value(s) of "
                                        f"{v.size}; {where} needs finite inputs (int8 would "
                                        f"turn them into ordinary numbers)")
            if table is None or name not in table or not v.size:
                continue
            share = saturated_share(v, scale_of(table, name), zero_point_of(table, name))
            c = counts.setdefault(name, [0.0, 0, np.inf, -np.inf])
            c[0] += share * v.size
            c[1] += v.size
            c[2], c[3] = min(c[2], float(v.min())), max(c[3], float(v.max()))
    warnings = []
    for name, (saturated, total, lo, hi) in counts.items():
        share = saturated / total
        if share > SATURATION_WARN:
            warnings.append(f"input {name!r}: {share:.1%} of its values saturate int8 (range "
                            f"[{lo:.4g}, {hi:.4g}], the calibration table covers about "
                            f"+-{127 * scale_of(table, name):.4g}); check the input's "
                            f"preprocessing against the calibration data's")
    return warnings
