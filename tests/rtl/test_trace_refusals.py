"""What the RTL engine refuses to play, decided from the registers before any simulation
(quick: no simulator runs)."""

from __future__ import annotations

import pytest

from accel.config import get_preset
from accel.rtl.cdma_image import image_line_refusal
from accel.trace.rtl_player import (
    TracePlayer,
    absent_unit,
    operand_addresses,
    per_element,
    refusal,
    too_large,
    unsupported,
)
from accel.trace.script import find_cfg, parse_cfg
from tests.conftest import shared_path

NV_SMALL = get_preset("nv_small")


@pytest.mark.parametrize(("symbol", "value", "words"), [
    ("NVDLA_CDMA.D_MISC_CFG_0", 0x1, "Winograd"),                  # CONV_MODE
    ("NVDLA_CSC.D_MISC_CFG_0", 0x100, "int16 or fp16 input"),       # IN_PRECISION
    ("NVDLA_CACC.D_MISC_CFG_0", 0x2000, "int16 or fp16 arithmetic"),  # PROC_PRECISION = 2
    ("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0x1, "PIXEL_FORMAT=0 (T_R8)"),        # one 8-bit channel
    ("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0x1401, "T_A2B10G10R10"),             # packed 10-bit
    ("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0x10c01, "pitch-linear"),              # PIXEL_MAPPING
    ("NVDLA_CSC.D_POST_Y_EXTENSION_0", 0x1, "post-Y-extension"),
    ("NVDLA_CDMA.D_WEIGHT_FORMAT_0", 0x1, "compressed weights"),
    ("NVDLA_CSC.D_BATCH_NUMBER_0", 0x3, "batches"),
    ("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0x3, "SDP output to PDP"),     # flying, to PDP
    ("NVDLA_SDP.D_DP_EW_CFG_0", 0x0, "element-wise (Y) stage"),
    ("NVDLA_SDP_RDMA.D_ERDMA_CFG_0", 0x0, "element-wise (EW) stage"),      # enabled
    ("NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0", 0x4, "int16 or fp16 input"),
    ("NVDLA_PDP.D_OPERATION_MODE_CFG_0", 0x1, "PDP fed by SDP on the fly"),   # max, flying
    ("NVDLA_PDP.D_DATA_FORMAT_0", 0x2, "int16 or fp16 pooling"),
    ("NVDLA_BDMA.CFG_LINE_0", 0x1, "does not implement"),
    ("NVDLA_CDP.D_DATA_FORMAT_0", 0x1, "int16 or fp16 normalization"),
    ("NVDLA_CDP_RDMA.D_SRC_SURFACE_STRIDE_0", 0x204, "multiple of the 8-byte atom"),
    ("NVDLA_SDP.D_DST_BASE_ADDR_HIGH_0", 0x1, "above 4 GiB"),
    ("NVDLA_PDP.D_DST_LINE_STRIDE_0", 0x9, "multiple of the 8-byte atom"),
])
def test_a_field_the_engine_lacks_is_named(symbol: str, value: int, words: str) -> None:
    why = unsupported(symbol, value, NV_SMALL)
    assert why is not None and words in why and symbol in why


@pytest.mark.parametrize(("symbol", "value"), [
    ("NVDLA_CDMA.D_MISC_CFG_0", 0x11000000),        # skip the data and weight releases
    ("NVDLA_CSC.D_MISC_CFG_0", 0x00110000),         # reuse data and weights
    ("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0x101300),     # pixel fields ignored for feature input
    ("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0x101b01),     # image, T_V8U8Y8A8, signed
    ("NVDLA_CDMA.D_CVT_CFG_0", 0xb0),               # a truncate without CVT_EN
    ("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0x9),        # flying, NaN to zero
    ("NVDLA_SDP.D_DP_EW_CFG_0", 0x2b),              # bypassed
    ("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0x0),        # the input from memory
    ("NVDLA_SDP_RDMA.D_BRDMA_CFG_0", 0x12),         # per-element operands (for SDP alone)
    ("NVDLA_PDP.D_OPERATION_MODE_CFG_0", 0x312),    # min, from memory, 4 slices
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
            # 29 pixels x 4 channels (15 atoms) by 96 rows by 12 output columns: the
            # windows take 17280 entries, the engine holds 16384 (accel.rtl.cdma_image)
            why = _refusal(trace)
            assert why is not None and "needs 17280 feature memory entries" in why, trace
        elif trace.name == "dc_32x26x76_6x3x76x270_int8_0":
            # 34 kernel groups x 10 channel groups x 18 taps x 8 kernels of weights
            why = _refusal(trace)
            assert why is not None and "needs 48960 weight memory entries" in why
            assert "the engine has 16384" in why
        elif trace.name.startswith(("dc_", "pdp_", "cdp_")):
            assert _refusal(trace) is None, trace
        elif trace.name.startswith("sdp_"):     # all but those of nv_small's missing Y stage
            why = _refusal(trace)
            assert (why is None) == ("_ew_" not in trace.name), (trace, why)


def test_image_input_is_refused_outside_nv_smalls_shape_and_past_the_line_buffer() -> None:
    why = unsupported("NVDLA_CDMA.D_DATAIN_FORMAT_0", 0xc01, get_preset("nv_large"))
    assert why is not None and "nv_small's shape only" in why and "nv_large" in why
    regs = {"D_DATAIN_FORMAT": 1, "D_ZERO_PADDING": (63 << 8) | 31, "D_DATAIN_SIZE_0": 929}
    # 31 + 930 + 63 = 1024 padded pixels, and the pixel after them: one more than it holds
    why = image_line_refusal(regs)
    assert why is not None and "31+930+63" in why and "1023 pixels" in why
    regs["D_DATAIN_SIZE_0"] = 928
    assert image_line_refusal(regs) is None
    regs["D_DATAIN_FORMAT"] = 0                                       # feature input
    regs["D_DATAIN_SIZE_0"] = 8191
    assert image_line_refusal(regs) is None


def test_an_image_operation_counts_its_windows_against_the_memory() -> None:
    # a 51-pixel image, 96 rows, windows of 29 pixels (116 channels) at x stride 2: 12
    # output columns x 96 rows x 15 atoms = 17280 entries (NVIDIA's img_* traces)
    regs = {"D_DATAIN_FORMAT": 1, "D_DATAIN_SIZE_EXT_0": (95 << 16) | 50,
            "D_DATAIN_SIZE_EXT_1": 3, "D_WEIGHT_SIZE_EXT_0": 9 << 16,
            "D_WEIGHT_SIZE_EXT_1": (31 << 16) | 115, "D_DATAOUT_SIZE_0": (43 << 16) | 11}
    why = too_large(regs, NV_SMALL)
    assert why is not None and "needs 17280 feature memory entries" in why
    regs["D_DATAIN_SIZE_EXT_0"] = (87 << 16) | 50                    # 88 rows: 15840
    assert too_large(regs, NV_SMALL) is None


def test_operands_above_4_gib_are_refused_where_a_stage_reads_them() -> None:
    high = {"NVDLA_SDP_RDMA.D_BS_BASE_ADDR_HIGH_0": 0xa3}
    # X1 on, its ALU from memory; then X1 bypassed (NVIDIA's pass-through traces)
    reads = {**high, "NVDLA_SDP.D_DP_BS_CFG_0": 0x50, "NVDLA_SDP.D_DP_BS_ALU_CFG_0": 0x1}
    assert "above 4 GiB" in operand_addresses(reads)
    assert operand_addresses({**reads, "NVDLA_SDP.D_DP_BS_CFG_0": 0x51}) is None


def test_per_element_operands_are_refused_where_the_engine_lacks_them() -> None:
    large = get_preset("nv_large")                  # a convolution engine only
    assert per_element({"NVDLA_SDP_RDMA.D_BRDMA_CFG_0": 0x12}, large) is not None
    assert per_element({"NVDLA_SDP_RDMA.D_NRDMA_CFG_0": 0x02}, large) is None  # per kernel
    assert per_element({"NVDLA_SDP_RDMA.D_BRDMA_CFG_0": 0x11}, large) is None  # disabled
    assert per_element({"NVDLA_SDP_RDMA.D_BRDMA_CFG_0": 0x12}, NV_SMALL) is None


def test_pdp_and_cdp_are_refused_outside_nv_smalls_shape() -> None:
    why = unsupported("NVDLA_CDP.D_OP_ENABLE_0", 1, get_preset("nv_medium_512"))
    assert why is not None and "does not implement" in why and "nv_medium_512" in why


@pytest.mark.parametrize(("regs", "words"), [
    # 8192 channels, 3 rows of 7: 1024 channel groups x 21 pixels = 21504 > 16384
    ({"D_DATAIN_SIZE_EXT_0": (2 << 16) | 6, "D_DATAIN_SIZE_EXT_1": 8191},
     "needs 21504 feature memory entries"),
    # 9 kernels of 9 x 9 x 1024 channels: 2 kernel groups x 128 x 81 x 8 = 165888
    ({"D_DATAIN_SIZE_EXT_1": 1023, "D_WEIGHT_SIZE_EXT_0": (8 << 16) | 8,
      "D_WEIGHT_SIZE_EXT_1": 8 << 16}, "needs 165888 weight memory entries"),
    # 520 kernels of 1x1x1: 65 kernel groups, one more than the 64 operand entries
    ({"D_WEIGHT_SIZE_EXT_1": 519 << 16}, "65 kernel groups"),
])
def test_an_operation_larger_than_the_memories_is_refused(regs: dict, words: str) -> None:
    why = too_large(regs, NV_SMALL)
    assert why is not None and words in why, why


def test_an_operation_that_fits_is_not_refused() -> None:
    # 128 x 16 x 8 input, 32 kernels of 3x3 (NVIDIA's dc_8x16x128): 2048 feature and
    # 4 x 16 x 9 x 8 = 4608 weight entries
    regs = {"D_DATAIN_SIZE_EXT_0": (15 << 16) | 7, "D_DATAIN_SIZE_EXT_1": 127,
            "D_WEIGHT_SIZE_EXT_0": (2 << 16) | 2, "D_WEIGHT_SIZE_EXT_1": 31 << 16}
    assert too_large(regs, NV_SMALL) is None


def test_reading_the_cdp_table_or_counters_is_refused(tmp_path) -> None:
    """The engine does not hold the CDP's table reads or counters: a trace reading them is
    refused, naming the register, rather than given other values."""
    cfg = tmp_path / "t.cfg"
    cfg.write_text("reg_write(NVDLA_CDP.S_LUT_ACCESS_CFG_0, 0x0);\n"
                   "reg_read(NVDLA_CDP.S_LUT_ACCESS_DATA_0, 0x5);\n")
    why = refusal(cfg, parse_cfg(cfg), NV_SMALL)
    assert why is not None and "S_LUT_ACCESS_DATA" in why and "t.cfg:2" in why


def test_an_element_wise_trace_is_skipped_where_the_configuration_lacks_the_y_stage(
        tmp_path) -> None:
    """NVIDIA's nv_small EW traces program SDP's Y stage, which nv_small does not have
    (``SDP_EW`` disabled): the player skips them, naming the register, before any
    simulation; a refusal for something nv_small has (Winograd) stays a failure."""
    why = unsupported("NVDLA_SDP.D_DP_EW_CFG_0", 0x0, NV_SMALL)
    assert absent_unit(why, NV_SMALL)
    assert not absent_unit(why, get_preset("nv_full"))
    assert not absent_unit(unsupported("NVDLA_CDMA.D_MISC_CFG_0", 0x1, NV_SMALL), NV_SMALL)
    trace = shared_path("nvdla", "traces", "nv_small", "sdp_3x3x32_ew_lo_lin_int8")
    with TracePlayer("icarus", "axi", tmp_path) as player:
        run = player.play(trace, NV_SMALL)
    assert run.skipped and not run.passed
    assert "D_DP_EW_CFG" in run.reason and "Y) stage" in run.reason
    assert not player.sims, "a simulation started for a skipped trace"
