"""The cmodel refuses CBUF programming the hardware cannot run, and models what it keeps.

Convolutions are programmed register by register on nv_small (32 banks of 512
entries of 8 bytes, 8-byte atoms, ATOMIC_K 8).  Legal and illegal values are
worked out by hand in the comments; results come from a plain numpy 1x1
convolution, never from the model.
"""

from __future__ import annotations

import numpy as np
import pytest

from accel.cmod import ConfigError, Dla, UnsupportedError
from accel.config import get_preset
from accel.trace.script import parse_cfg
from tests.accel.cmod.test_dla import _pack_feature, _pack_weights
from tests.conftest import shared_path

X1, X2, W1, W2, OUT = 0x1000_0000, 0x1100_0000, 0x2000_0000, 0x2100_0000, 0x3000_0000
UNITS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC", "SDP")
REUSE_DATA, REUSE_WEIGHTS, KEEP_DATA, KEEP_WEIGHTS = 1 << 16, 1 << 20, 1 << 24, 1 << 28


def _dla(arrays: dict[int, np.ndarray]) -> Dla:
    """nv_small with ``arrays`` (feature cubes [C, H, W] or weights [K, C]) in memory."""
    dla = Dla(get_preset("nv_small"))
    for addr, a in arrays.items():
        data = (_pack_feature(a, 8, a.shape[2] * 8, a.shape[1] * a.shape[2] * 8) if a.ndim == 3
                else _pack_weights(a[:, :, None, None], 8, 8))
        dla.dram.map(addr, len(data))
        dla.dram.write(addr, data)
    dla.dram.map(OUT, 1 << 16)
    return dla


def _conv(dla: Dla, *, c=8, h=2, w=3, k=8, x=X1, wt=W1, misc=0, banks=(1, 1), entries=None,
          weight_bytes=None, csc=None) -> dict:
    """Program and run a 1x1 conv, SDP identity; return the conv's stats record.

    ``entries`` defaults to one entry per 8-channel atom per pixel, ``weight_bytes``
    to ``k * c`` padded to 128; ``csc`` overrides CSC registers.
    """
    wr = dla.write_reg
    for u in UNITS:  # program the register group each unit executes next
        wr(f"NVDLA_{u}.S_POINTER_0", dla.regs[f"NVDLA_{u}"].consumer)
    entries = w * -(-c // 8) if entries is None else entries
    weight_bytes = -(-k * c // 128) * 128 if weight_bytes is None else weight_bytes
    bank = (banks[0] - 1) | ((banks[1] - 1) << 16)
    for u in ("CDMA", "CSC"):
        wr(f"NVDLA_{u}.D_MISC_CFG_0", misc)
        wr(f"NVDLA_{u}.D_BANK_0", bank)
        wr(f"NVDLA_{u}.D_ENTRY_PER_SLICE_0", entries - 1)
        wr(f"NVDLA_{u}.D_WEIGHT_BYTES_0", weight_bytes)
    wr("NVDLA_CDMA.D_DATAIN_SIZE_0_0", (w - 1) | ((h - 1) << 16))
    wr("NVDLA_CDMA.D_DATAIN_SIZE_1_0", c - 1)
    wr("NVDLA_CDMA.D_DAIN_ADDR_LOW_0_0", x)
    wr("NVDLA_CDMA.D_LINE_STRIDE_0", w * 8)
    wr("NVDLA_CDMA.D_SURF_STRIDE_0", w * h * 8)
    wr("NVDLA_CDMA.D_WEIGHT_ADDR_LOW_0", wt)
    wr("NVDLA_CDMA.D_WEIGHT_SIZE_0_0", c - 1)
    wr("NVDLA_CDMA.D_WEIGHT_SIZE_1_0", k - 1)
    wr("NVDLA_CSC.D_WEIGHT_SIZE_EXT_1_0", (c - 1) | ((k - 1) << 16))
    wr("NVDLA_CSC.D_DATAOUT_SIZE_0_0", (w - 1) | ((h - 1) << 16))
    wr("NVDLA_CSC.D_RELEASE_0", h - 1)
    for name, value in (csc or {}).items():
        wr(f"NVDLA_CSC.{name}_0", value)
    wr("NVDLA_SDP.D_DATA_CUBE_WIDTH_0", w - 1)
    wr("NVDLA_SDP.D_DATA_CUBE_HEIGHT_0", h - 1)
    wr("NVDLA_SDP.D_DATA_CUBE_CHANNEL_0", k - 1)
    wr("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", OUT)
    wr("NVDLA_SDP.D_DST_LINE_STRIDE_0", w * 8)
    wr("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", w * h * 8)
    wr("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 1)          # on the fly from CACC
    for stage in ("BS", "BN", "EW"):
        wr(f"NVDLA_SDP.D_DP_{stage}_CFG_0", 1)       # bypassed
    wr("NVDLA_SDP.D_CVT_SCALE_0", 1)
    n = len(dla.stats)
    for u in UNITS[::-1]:                            # CDMA last starts the pipeline
        wr(f"NVDLA_{u}.D_OP_ENABLE_0", 1)
    assert len(dla.stats) == n + 1 and dla.stats[-1].unit == "CONV"
    return dla.stats[-1]


def _out(dla: Dla, k=8, h=2, w=3) -> np.ndarray:
    raw = dla.dram.read(OUT, w * h * 8).view(np.int8).reshape(h, w, 8)
    return raw[:, :, :k].transpose(2, 0, 1).astype(np.int64)


def _ref(x: np.ndarray, wt: np.ndarray) -> np.ndarray:
    """Plain 1x1 convolution, CACC/SDP identity, int8 saturation."""
    return np.clip(np.einsum("kc,chw->khw", wt, x), -128, 127)


RNG = np.random.default_rng(3)
XA, XB = RNG.integers(-3, 4, (8, 2, 3)), RNG.integers(-3, 4, (8, 2, 3))
WA, WB = RNG.integers(-3, 4, (8, 8)), RNG.integers(-3, 4, (8, 8))


# --------------------------------------------------------------------- register checks
def test_legal_conv_runs_and_records_its_cbuf_use():
    dla = _dla({X1: XA, W1: WA})
    rec = _conv(dla)
    assert np.array_equal(_out(dla), _ref(XA, WA))
    assert rec.details["cbuf"] == {"data_banks": 1, "weight_banks": 1, "data": "fetched",
                           "weights": "fetched", "kept": []}


def test_bank_sum_at_most_the_preset_banks():
    dla = _dla({X1: XA, W1: WA})
    _conv(dla, banks=(16, 16))                       # exactly 32 banks: legal
    with pytest.raises(ConfigError, match=r"CDMA.D_BANK = 0x10000f: DATA_BANK\+1 \(16\) \+ "
                                          r"WEIGHT_BANK\+1 \(17\) = 33 banks, nv_small has 32"):
        _conv(dla, banks=(16, 17))


def test_csc_must_program_the_cdma_bank_split():
    dla = _dla({X1: XA, W1: WA})
    with pytest.raises(ConfigError, match=r"CSC.D_BANK = 0x10000: the bank split differs from "
                                          r"CDMA.D_BANK = 0x0"):
        _conv(dla, csc={"D_BANK": 0x10000})


def test_entries_per_slice_must_be_the_row_size():
    # 3 pixels x 16 channels: two 8-byte atoms per pixel, one entry each -> 6 entries
    dla = _dla({X1: RNG.integers(-3, 4, (16, 2, 3)), W1: RNG.integers(-3, 4, (8, 16))})
    _conv(dla, c=16, entries=6)
    with pytest.raises(ConfigError, match=r"CDMA.D_ENTRY_PER_SLICE = 0x4: ENTRIES\+1 = 5, but an "
                                          r"input row of 3 pixels x 16 channels takes 6 CBUF "
                                          r"entries of 8 bytes on nv_small"):
        _conv(dla, c=16, entries=5)
    with pytest.raises(ConfigError, match=r"CSC.D_ENTRY_PER_SLICE = 0x6: the entries per input "
                                          r"row differs from CDMA.D_ENTRY_PER_SLICE = 0x5"):
        _conv(dla, c=16, entries=6, csc={"D_ENTRY_PER_SLICE": 6})


def test_the_whole_input_must_fit_its_banks():
    # 64 pixels x 8 channels = 64 entries a row; 8 rows fill one 512-entry bank exactly
    x = RNG.integers(-3, 4, (8, 9, 64))
    dla = _dla({X1: x, W1: WA})
    _conv(dla, h=8, w=64)
    with pytest.raises(ConfigError, match=r"CDMA.D_BANK = 0x0: the input \(9 rows x 64 entries "
                                          r"= 576\) does not fit DATA_BANK\+1 = 1 banks of 512 "
                                          r"entries \(512\); it needs 2 banks"):
        _conv(dla, h=9, w=64)
    _conv(dla, h=9, w=64, banks=(2, 1))


@pytest.mark.parametrize("nbytes,ok", [(64, True), (128, True), (72, True), (56, False),
                                       (136, False), (68, False)])
def test_weight_bytes_between_packed_and_padded_size(nbytes, ok):
    # 8 kernels x 8 bytes = 64 bytes, padded to 128; whole 8-byte entries
    dla = _dla({X1: XA, W1: WA})
    if ok:
        _conv(dla, weight_bytes=nbytes)
        return
    with pytest.raises(ConfigError, match=rf"CDMA.D_WEIGHT_BYTES = {nbytes:#x}: 8 kernels x "
                                          r"BYTE_PER_KERNEL\+1 = 8 bytes need WEIGHT_BYTES "
                                          r"64..128 \(padded to at most 128 bytes\), a multiple "
                                          r"of the 8-byte CBUF entry"):
        _conv(dla, weight_bytes=nbytes)


def test_weight_banks_hold_at_least_one_kernel_group():
    # 1x1 kernels of 1024 channels: one group of 8 kernels is 8192 bytes = 2 banks of 4096
    x, wt = RNG.integers(-1, 2, (1024, 1, 1)), RNG.integers(-1, 2, (16, 1024))
    dla = _dla({X1: x, W1: wt})
    kw = dict(c=1024, h=1, w=1, k=16, banks=(1, 2))   # a row is 128 entries
    rec = _conv(dla, **kw)                             # 16 kernels (4 banks) stream through 2
    assert rec.details["cbuf"]["weights"] == "streamed"
    raw = dla.dram.read(OUT, 16).view(np.int8)  # two surfaces of 8 kernels, 1 pixel each
    assert np.array_equal(raw, _ref(x, wt)[:, 0, 0])
    with pytest.raises(ConfigError, match=r"WEIGHT_BANK\+1 = 1 banks cannot hold one kernel "
                                          r"group \(8 kernels x 1024 bytes\); weights need at "
                                          r"least 2 banks"):
        _conv(dla, **{**kw, "banks": (1, 1)})


def test_kept_weights_must_fit_their_banks():
    # 16 kernels x 1024 bytes need 4 banks: with 2 they stream, and cannot be kept
    dla = _dla({X1: RNG.integers(-1, 2, (1024, 1, 1)), W1: RNG.integers(-1, 2, (16, 1024))})
    kw = dict(c=1024, h=1, w=1, k=16)
    with pytest.raises(ConfigError, match=r"CDMA.D_MISC_CFG = 0x10000000: SKIP_WEIGHT_RLS keeps "
                                          r"the weights, but 16 kernels x 1024 bytes need 4 "
                                          r"banks and stream through WEIGHT_BANK\+1 = 2"):
        _conv(dla, **kw, banks=(1, 2), misc=KEEP_WEIGHTS)
    assert _conv(dla, **kw, banks=(1, 4), misc=KEEP_WEIGHTS).details["cbuf"]["kept"] == ["weights"]


def _trace_regs(preset: str, name: str) -> list[tuple[str, int]]:
    path = shared_path("nvdla", "traces", preset, name)
    return [(c.args[0], int(c.args[1], 0)) for c in parse_cfg(path / f"{name}.cfg")
            if c.name == "reg_write"]


@pytest.mark.parametrize("symbol,value,message", [
    ("D_BANK_0", 0xFF00FF, r"CDMA.D_BANK = 0x1f001f: DATA_BANK\+1 \(32\) \+ WEIGHT_BANK\+1 "
                           r"\(32\) = 64 banks, nv_small has 32"),
    ("D_WEIGHT_BYTES_0", 0xFFFFFF0, r"CDMA.D_WEIGHT_BYTES = 0xffffff0: 32 kernels x "
                                    r"BYTE_PER_KERNEL\+1 = 1152 bytes need WEIGHT_BYTES 36864"),
])
def test_nvidia_trace_registers_with_an_impossible_cbuf_value(symbol, value, message):
    """dc_8x16x128_3x3x128x32 as NVIDIA wrote it, one CBUF register (CDMA and CSC) changed."""
    dla = Dla(get_preset("nv_small"))
    regs = _trace_regs("nv_small", "dc_8x16x128_3x3x128x32_int8")
    with pytest.raises(ConfigError, match=message):
        for sym, v in regs:
            if sym.endswith(symbol) and sym.split(".")[0] in ("NVDLA_CDMA", "NVDLA_CSC"):
                v = value
            dla.write_reg(sym, v)


@pytest.mark.parametrize("preset,name", [
    ("nv_small", "dc_32x26x76_6x3x76x270_int8_0"),          # 360 KiB streamed through 6 banks
    ("nv_small", "img_51x96x4_1x10x4x32_A8B8G8R8_int8_0"),
    ("nv_large", "img_51x96x4_1x10x4x32_R8G8B8A8_int8_0"),
    ("nv_medium_512", "img_51x96x4_1x10x4x32_R8G8B8A8_int8_0"),
])
def test_cbuf_registers_of_traces_without_data_pass_the_checks(preset, name):
    """The shared traces these lack data (they skip), but their registers are NVIDIA's."""
    from accel.cmod import cbuf_state
    dla = Dla(get_preset(preset))
    for sym, v in _trace_regs(preset, name):
        if not sym.endswith("D_OP_ENABLE_0"):
            dla.write_reg(sym, v)
    group = {u: dla.regs[f"NVDLA_{u}"].group(dla.regs[f"NVDLA_{u}"].consumer)
             for u in ("CDMA", "CSC")}
    use = cbuf_state.check(dla.cfg, group["CDMA"], group["CSC"])
    assert use.data_banks + use.weight_banks <= dla.cfg.cbuf_bank_number
    if "270" in name:
        assert (use.weight_banks, use.weights_resident) == (6, False)


# --------------------------------------------------------------------- reuse
def test_kept_weights_are_used_instead_of_memory():
    dla = _dla({X1: XA, X2: XB, W1: WA, W2: WB})
    assert _conv(dla, misc=KEEP_WEIGHTS).details["cbuf"]["kept"] == ["weights"]
    rec = _conv(dla, x=X2, wt=W2, misc=REUSE_WEIGHTS)     # memory at W2 holds other weights
    assert rec.details["cbuf"]["weights"] == "reused"
    assert np.array_equal(_out(dla), _ref(XB, WA))        # the CBUF's (WA), not memory's
    assert not np.array_equal(_ref(XB, WA), _ref(XB, WB))
    with pytest.raises(ConfigError, match="WEIGHT_REUSE=1 but no weights are kept"):
        _conv(dla, x=X2, wt=W2, misc=REUSE_WEIGHTS)       # the reuse released them


def test_weights_stay_kept_through_a_chain_of_reusing_ops():
    dla = _dla({X1: XA, X2: XB, W1: WA, W2: WB})
    _conv(dla, misc=KEEP_WEIGHTS)
    _conv(dla, x=X2, wt=W2, misc=REUSE_WEIGHTS | KEEP_WEIGHTS)
    _conv(dla, x=X1, wt=W2, misc=REUSE_WEIGHTS)
    assert np.array_equal(_out(dla), _ref(XA, WA))


def test_weight_reuse_without_kept_weights_is_refused():
    dla = _dla({X1: XA, W1: WA})
    with pytest.raises(ConfigError, match=r"CDMA.D_MISC_CFG = 0x100000: WEIGHT_REUSE=1 but no "
                                          r"weights are kept in the CBUF"):
        _conv(dla, misc=REUSE_WEIGHTS)                    # nothing ran before
    _conv(dla)                                            # released at the end
    with pytest.raises(ConfigError, match="WEIGHT_REUSE=1 but no weights are kept"):
        _conv(dla, misc=REUSE_WEIGHTS)


def test_weight_reuse_needs_the_same_weights_and_weight_banks():
    dla = _dla({X1: XA, W1: WA, W2: RNG.integers(-3, 4, (16, 8))})
    _conv(dla, misc=KEEP_WEIGHTS)
    with pytest.raises(ConfigError, match=r"WEIGHT_REUSE=1 with WEIGHT_BANK\+1 = 2, but the kept "
                                          r"weights are in 1 banks"):
        _conv(dla, misc=REUSE_WEIGHTS, banks=(1, 2))
    with pytest.raises(ConfigError, match=r"WEIGHT_REUSE=1 but the kept weights differ "
                                          r"\(kernels 8 -> 16\)"):
        _conv(dla, misc=REUSE_WEIGHTS, k=16, wt=W2)
    with pytest.raises(ConfigError, match=r"differ \(weight_bytes 128 -> 64\)"):
        _conv(dla, misc=REUSE_WEIGHTS, weight_bytes=64)


def test_a_changed_data_bank_refetches_the_weights_as_the_hardware_does():
    dla = _dla({X1: XA, W1: WA, W2: WB})
    _conv(dla, misc=KEEP_WEIGHTS)
    rec = _conv(dla, wt=W2, misc=REUSE_WEIGHTS, banks=(2, 1))
    assert rec.details["cbuf"]["weights"] == "fetched"
    assert "DATA_BANK+1 changed 1 -> 2" in rec.details["cbuf"]["note"]
    assert np.array_equal(_out(dla), _ref(XA, WB))        # fetched from memory again


def test_kept_input_is_used_instead_of_memory():
    dla = _dla({X1: XA, X2: XB, W1: WA, W2: WB})
    assert _conv(dla, misc=KEEP_DATA).details["cbuf"]["kept"] == ["data"]
    rec = _conv(dla, x=X2, wt=W2, misc=REUSE_DATA)
    assert rec.details["cbuf"]["data"] == "reused"
    assert np.array_equal(_out(dla), _ref(XA, WB))        # the CBUF's input (XA)
    with pytest.raises(ConfigError, match=r"CDMA.D_MISC_CFG = 0x10000: DATA_REUSE=1 but no input "
                                          r"is kept"):
        _conv(dla, x=X2, misc=REUSE_DATA)


def test_data_reuse_needs_the_same_input_geometry_and_data_banks():
    dla = _dla({X1: XA, W1: WA})
    _conv(dla, misc=KEEP_DATA)
    with pytest.raises(ConfigError, match=r"DATA_REUSE=1 but the kept input differs "
                                          r"\(data_banks 1 -> 2\)"):
        _conv(dla, misc=REUSE_DATA, banks=(2, 1))
    _conv(dla, misc=KEEP_DATA)
    with pytest.raises(ConfigError, match=r"differs \(entries 3 -> 2, width 3 -> 2\)"):
        _conv(dla, misc=REUSE_DATA, w=2)


def test_partial_data_reuse_is_not_modelled():
    dla = _dla({X1: XA, W1: WA})
    _conv(dla, csc={"D_RELEASE": 0})                      # releases 1 of its 2 rows
    with pytest.raises(UnsupportedError, match="partial reuse of the 1 rows"):
        _conv(dla, misc=REUSE_DATA)


def test_cdma_and_csc_reuse_bits_must_agree():
    dla = _dla({X1: XA, W1: WA})
    with pytest.raises(ConfigError, match=r"CSC.D_MISC_CFG = 0x0: SKIP_WEIGHT_RLS=0 but "
                                          r"CDMA.D_MISC_CFG has SKIP_WEIGHT_RLS=1"):
        _conv(dla, misc=KEEP_WEIGHTS, csc={"D_MISC_CFG": 0})


def test_non_conv_ops_leave_the_kept_weights_alone():
    dla = _dla({X1: XA, X2: XB, W1: WA, W2: WB})
    _conv(dla, misc=KEEP_WEIGHTS)
    # an SDP pass from memory between the two convolutions (copies XB to OUT)
    wr = dla.write_reg
    wr("NVDLA_SDP.S_POINTER_0", dla.regs["NVDLA_SDP"].consumer)
    for u in ("SDP", "SDP_RDMA"):
        wr(f"NVDLA_{u}.D_DATA_CUBE_WIDTH_0", 2)
        wr(f"NVDLA_{u}.D_DATA_CUBE_HEIGHT_0", 1)
        wr(f"NVDLA_{u}.D_DATA_CUBE_CHANNEL_0", 7)
    wr("NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0", 0)
    wr("NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0", X2)
    wr("NVDLA_SDP_RDMA.D_SRC_LINE_STRIDE_0", 24)
    wr("NVDLA_SDP_RDMA.D_SRC_SURFACE_STRIDE_0", 48)
    wr("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0)
    wr("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", OUT)
    wr("NVDLA_SDP.D_DST_LINE_STRIDE_0", 24)
    wr("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", 48)
    for stage in ("BS", "BN", "EW"):
        wr(f"NVDLA_SDP.D_DP_{stage}_CFG_0", 1)
    wr("NVDLA_SDP.D_CVT_SCALE_0", 1)
    wr("NVDLA_SDP.D_OP_ENABLE_0", 1)
    wr("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    assert dla.stats[-1].unit == "SDP" and np.array_equal(_out(dla), XB)
    _conv(dla, x=X2, wt=W2, misc=REUSE_WEIGHTS)
    assert np.array_equal(_out(dla), _ref(XB, WA))


def test_cycle_estimate_of_reused_weights_has_no_weight_dma():
    # 1 pixel of 1024 channels, 16 kernels: 1 x 128 channel atoms x 2 kernel groups = 256
    # MAC atoms in 256 rounds of one point each, but a round lasts the 8 loads of its
    # kernels: 2048 cycles, 1024 per kernel group.  Fetching 16 x 1024 weight bytes over
    # nv_small's 8-byte bus takes 2048 cycles, the 1024 input bytes 128.  The first kernel
    # group ends no sooner than the input and its 8 x 1024 weight bytes are in (128 + 1024
    # cycles), the second group's 1024 follow.  SDP on the fly passes the last stripe (1
    # point of the second kernel group: 8 elements at 1 per cycle) after the last round.
    x, wt = RNG.integers(-1, 2, (1024, 1, 1)), RNG.integers(-1, 2, (16, 1024))
    dla = _dla({X1: x, W1: wt})
    kw = dict(c=1024, h=1, w=1, k=16, banks=(1, 4))
    first = _conv(dla, **kw, misc=KEEP_WEIGHTS)
    assert (first.details["mac_atoms"], first.cycles) == (256, 128 + 1024 + 1024 + 8)
    reused = _conv(dla, **kw, misc=REUSE_WEIGHTS)       # the rounds, then the last stripe
    assert (reused.details["cbuf"]["weights"], reused.cycles) == ("reused", 2048 + 8)
    kept_data = _conv(dla, **kw, misc=KEEP_DATA)
    assert kept_data.cycles == 128 + 1024 + 1024 + 8
    # weights only: the first group's 1024 fetch cycles, the second group's rounds
    assert _conv(dla, **kw, misc=REUSE_DATA).cycles == 1024 + 1024 + 8
