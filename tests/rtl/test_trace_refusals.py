"""What the RTL engine refuses to play, decided from the registers before any simulation
(quick: no simulator runs)."""

from __future__ import annotations

import pytest

from accel.cmod.trace import find_cfg, parse_cfg
from accel.config import get_preset
from accel.rtl.trace_player import refusal, unsupported
from tests.conftest import shared_path

NV_SMALL = get_preset("nv_small")


@pytest.mark.parametrize(("symbol", "value", "words"), [
    ("NVDLA_CDMA.D_MISC_CFG_0", 0x1, "Winograd"),                  # CONV_MODE
    ("NVDLA_CSC.D_MISC_CFG_0", 0x100, "int16 or fp16 input"),       # IN_PRECISION
    ("NVDLA_CACC.D_MISC_CFG_0", 0x2000, "int16 or fp16 arithmetic"),  # PROC_PRECISION = 2
    ("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0x1, "image (pixel) input"),
    ("NVDLA_CDMA.D_CVT_CFG_0", 0x1, "input data conversion"),
    ("NVDLA_CDMA.D_WEIGHT_FORMAT_0", 0x1, "compressed weights"),
    ("NVDLA_CSC.D_BATCH_NUMBER_0", 0x3, "batches"),
    ("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0x3, "SDP output to PDP"),     # flying, to PDP
    ("NVDLA_SDP.D_DP_EW_CFG_0", 0x0, "element-wise (Y) stage"),
])
def test_a_field_the_engine_lacks_is_named(symbol: str, value: int, words: str) -> None:
    why = unsupported(symbol, value, NV_SMALL)
    assert why is not None and words in why and symbol in why


@pytest.mark.parametrize(("symbol", "value"), [
    ("NVDLA_CDMA.D_MISC_CFG_0", 0x11000000),        # skip the data and weight releases
    ("NVDLA_CSC.D_MISC_CFG_0", 0x00110000),         # reuse data and weights
    ("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0x101300),     # pixel fields ignored for feature input
    ("NVDLA_CDMA.D_CVT_CFG_0", 0xb0),               # a truncate without CVT_EN
    ("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0x9),        # flying, NaN to zero
    ("NVDLA_SDP.D_DP_EW_CFG_0", 0x2b),              # bypassed
])
def test_what_the_engine_implements_passes(symbol: str, value: int) -> None:
    assert unsupported(symbol, value, NV_SMALL) is None


def _refusal(trace) -> str | None:
    cfg_path = find_cfg(trace)
    return refusal(cfg_path, parse_cfg(cfg_path), NV_SMALL)


def test_nvidias_image_traces_are_refused_and_the_dc_traces_are_not() -> None:
    root = shared_path("nvdla", "traces", "nv_small")
    for trace in sorted(root.iterdir()):
        if trace.name.startswith("img_"):
            why = _refusal(trace)
            assert why is not None and "DATAIN_FORMAT=1" in why and "image" in why, trace
        elif trace.name.startswith("dc_"):
            assert _refusal(trace) is None, trace
