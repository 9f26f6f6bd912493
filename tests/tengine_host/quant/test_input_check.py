"""The one check of int8 inputs: NaN/Inf refused, saturation measured and warned about."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.errors import TengineInputError
from tengine_host.quant.input_check import SATURATION_WARN, check_int8_inputs, saturated_share


def test_saturated_share_follows_round_half_away_and_the_zero_point():
    # scale 1: 127.5 rounds (away) to 128 and -128.5 to -129, both outside int8;
    # 127.4 -> 127 and -128.4 -> -128 stay inside
    x = np.array([127.4, 127.5, -128.5, -128.4, 0.0])
    assert saturated_share(x, 1.0) == pytest.approx(2 / 5)
    # zero point 1 shifts the codes up: 126.5 -> 127 + 1 = 128 saturates, -129.4 -> -128 not
    assert saturated_share(np.array([126.5, -129.4, 126.4]), 1.0, 1) == pytest.approx(1 / 3)
    assert saturated_share(np.array([1e30, -1e30]), 0.01) == 1.0       # no overflow warning
    assert saturated_share(np.zeros(0), 0.5) == 0.0


def test_nan_and_inf_are_refused_with_the_count():
    x = np.zeros((1, 2, 2), np.float32)
    x[0, 0, 0], x[0, 1, 1] = np.nan, -np.inf
    with pytest.raises(TengineInputError, match=r"'img' has 2 NaN/Inf value\(s\) of 4; compare"):
        check_int8_inputs({"img": x}, None, "compare")
    assert check_int8_inputs({"ids": np.array([1, 2])}, None) == []    # integers: not quantized


def test_saturation_warns_above_the_threshold_only():
    table = {"x": {"scale": 0.01}}           # covers about +-1.27
    inside = np.linspace(-1.2, 1.2, 1000)
    assert check_int8_inputs({"x": inside}, table) == []
    few = inside.copy()
    few[:int(SATURATION_WARN * 1000)] = 5.0  # exactly the threshold share: no warning
    assert check_int8_inputs({"x": few}, table) == []
    many = inside * 1e30
    (message,) = check_int8_inputs({"x": many}, table)
    share = np.mean(np.abs(many) > 1.275)
    assert f"{share:.1%} of its values saturate" in message and "'x'" in message
    assert check_int8_inputs({"y": many}, table) == []          # no entry: nothing to say


def test_samples_are_checked_together():
    from tengine_host.quant.input_check import check_int8_samples

    table = {"x": {"scale": 1.0}}
    # sample 0: 1 of 10 saturates (200); sample 1: 3 of 10 (-200 x 3): 4 of 20 overall
    s0 = np.zeros(10)
    s0[0] = 200.0
    s1 = np.zeros(10)
    s1[:3] = -200.0
    (message,) = check_int8_samples([{"x": s0}, {"x": s1}], table, "quantize")
    assert "20.0% of its values saturate" in message and "[-200, 200]" in message
    s1[5] = np.nan
    with pytest.raises(TengineInputError, match=r"'x' \(sample 1\) has 1 NaN/Inf .* quantize"):
        check_int8_samples([{"x": s0}, {"x": s1}], None, "quantize")
