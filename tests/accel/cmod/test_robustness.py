"""Random register programming per unit: an output or a clear error, never a crash.

Each example writes random values to every software-writable register of the
units of one operation (and the LUT port), maps a small memory region, and
enables the operation (for convolutions, half the examples first get the CBUF
registers their drawn sizes need, so that they get past the CBUF checks).
Acceptable outcomes: the operation completes, or it raises ConfigError (names
unit, register, value), UnsupportedError (names what is not modelled,
including the model's size limit) or DramAccessError (names the unit and the
byte range outside memory).  Any other exception, a hang or
an access outside the mapped memory fails the test.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel import cbuf
from accel.cmod import ConfigError, Dla, Dram, DramAccessError, UnsupportedError
from accel.config import get_preset
from accel.regs import UNITS

OPS = {
    "conv": ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CACC",
             "NVDLA_SDP", "NVDLA_SDP_RDMA"),
    "image": ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CACC",
              "NVDLA_SDP", "NVDLA_SDP_RDMA"),
    "sdp": ("NVDLA_SDP", "NVDLA_SDP_RDMA"),
    "pdp": ("NVDLA_PDP", "NVDLA_PDP_RDMA"),
    "cdp": ("NVDLA_CDP", "NVDLA_CDP_RDMA"),
}
# fields that route the operation (which units take part) and pick the data type
# or an unmodelled mode: forced so that examples reach the int8 datapaths instead of
# stalling or stopping at "not modelled"; every other bit stays random
_SDP_MEM = {("NVDLA_SDP", "D_FEATURE_MODE_CFG"): (0x1F07, 0),
            ("NVDLA_SDP", "D_DATA_FORMAT"): (0xF, 0), ("NVDLA_SDP", "D_DP_EW_CFG"): (0x1, 0x1),
            ("NVDLA_SDP_RDMA", "D_FEATURE_MODE_CFG"): (0x1FFF, 0)}
_CONV = {("NVDLA_CDMA", u): (m, 0) for u, m in (("D_MISC_CFG", 0x3301), ("D_DATAIN_FORMAT", 1),
                                                 ("D_WEIGHT_FORMAT", 1), ("D_BATCH_NUMBER", 0x1F))}
_CONV.update({("NVDLA_CSC", "D_MISC_CFG"): (0x3301, 0), ("NVDLA_CSC", "D_DATAIN_FORMAT"): (1, 0),
              ("NVDLA_CSC", "D_BATCH_NUMBER"): (0x1F, 0)})
ROUTE = {
    "conv": {**_SDP_MEM, **_CONV, ("NVDLA_SDP", "D_FEATURE_MODE_CFG"): (0x1F07, 0x1)},
    # image input: A8B8G8R8 pitch-linear, 4 channels, pre-extended kernel width 1
    "image": {**_SDP_MEM, **_CONV, ("NVDLA_SDP", "D_FEATURE_MODE_CFG"): (0x1F07, 0x1),
              ("NVDLA_CDMA", "D_DATAIN_FORMAT"): (0x13F01, 0xC01),
              ("NVDLA_CSC", "D_DATAIN_FORMAT"): (1, 1),
              ("NVDLA_CDMA", "D_DATAIN_SIZE_1"): (0x1FFF, 3),
              ("NVDLA_CSC", "D_DATAIN_SIZE_EXT_1"): (0x1FFF, 3),
              ("NVDLA_CSC", "D_POST_Y_EXTENSION"): (3, 0),
              ("NVDLA_CSC", "D_WEIGHT_SIZE_EXT_0"): (0x1F, 0)},
    "sdp": _SDP_MEM,
    "pdp": {("NVDLA_PDP", "D_OPERATION_MODE_CFG"): (0x10, 0x10),
            ("NVDLA_PDP", "D_DATA_FORMAT"): (0x3, 0)},
    "cdp": {("NVDLA_CDP", "D_DATA_FORMAT"): (0x3, 0),
            ("NVDLA_CDP_RDMA", "D_DATA_FORMAT"): (0x3, 0)},
}
REGION = (0, 1 << 16)
SMALL = re.compile(r"WIDTH|HEIGHT|CHANNEL|KERNEL|SIZE|BYTES|ENTRIES|STRIDE|ADDR_LOW|"
                   r"BASE_ADDR|LINE|SURF")


def _writable(unit: str) -> list[str]:
    return [r.name for r in UNITS[unit].registers.values()
            if r.name not in ("D_OP_ENABLE", "S_POINTER", "S_STATUS")
            and any("w" in f.access for f in r.fields)]


def _values(units):
    names = [(u, n) for u in units for n in _writable(u)]
    # half the registers that size or place a cube get small values, so that some
    # examples reach the datapath instead of all failing on the first DMA
    small = st.one_of(st.integers(0, 15), st.integers(0, 0xFFFF), st.integers(0, 2**32 - 1))
    full = st.integers(0, 2**32 - 1)
    return st.fixed_dictionaries({(u, n): (small if SMALL.search(n) else full) for u, n in names})


def _fit_cbuf(dla: Dla) -> None:
    """Program CDMA and CSC with the CBUF values the drawn sizes need (the rules of
    accel.cbuf), so that examples get past the CBUF checks."""
    cfg, rd, wr = dla.cfg, dla.read_reg, dla.write_reg
    size0, c = rd("NVDLA_CDMA.D_DATAIN_SIZE_0_0"), (rd("NVDLA_CDMA.D_DATAIN_SIZE_1_0") & 0x1FFF) + 1
    w, h = (size0 & 0x1FFF) + 1, ((size0 >> 16) & 0x1FFF) + 1
    if rd("NVDLA_CDMA.D_DATAIN_FORMAT_0") & 1:
        pads = rd("NVDLA_CDMA.D_ZERO_PADDING_0")
        entries = cbuf.image_entries_per_slice(cfg, c, w + (pads & 0x1F) + ((pads >> 8) & 0x1F))
    else:
        entries = cbuf.entries_per_slice(cfg, c, w)
    k = (rd("NVDLA_CDMA.D_WEIGHT_SIZE_1_0") & 0x1FFF) + 1
    bpk = (rd("NVDLA_CDMA.D_WEIGHT_SIZE_0_0") & 0x3FFFF) + 1
    data = min(cfg.cbuf_bank_number - 1, -(-entries * h // cfg.cbuf_bank_depth))
    keep = rd("NVDLA_CDMA.D_MISC_CFG_0") & ((1 << 24) | (1 << 28))   # no reuse: nothing kept
    for unit in ("NVDLA_CDMA", "NVDLA_CSC"):
        wr(f"{unit}.D_ENTRY_PER_SLICE_0", entries - 1)
        wr(f"{unit}.D_BANK_0", (data - 1) | ((cfg.cbuf_bank_number - data - 1) << 16))
        wr(f"{unit}.D_WEIGHT_BYTES_0", cbuf.weight_bytes(k, bpk))
        wr(f"{unit}.D_MISC_CFG_0", (rd(f"{unit}.D_MISC_CFG_0") & 0xFFFF) | keep)


def _play(op: str, preset: str, values: dict, lut: list[int], fit_cbuf: bool = False) -> None:
    dla = Dla(get_preset(preset), Dram())
    dla.dram.map(*REGION, "all")
    before = {b: s for b, s, _ in dla.dram.regions}
    try:
        for (unit, name), value in values.items():
            mask, forced = ROUTE[op].get((unit, name), (0, 0))
            dla.write_reg(f"{unit}.{name}", (value & ~mask) | forced)
        if fit_cbuf and op in ("conv", "image"):
            _fit_cbuf(dla)
        for unit in ("NVDLA_CDP", "NVDLA_SDP"):
            dla.write_reg(f"{unit}.S_LUT_ACCESS_CFG", 1 << 17)
            for v in lut:
                dla.write_reg(f"{unit}.S_LUT_ACCESS_DATA", v)
        for unit in OPS[op][::-1]:  # the conv trigger (CDMA) goes last
            dla.write_reg(f"{unit}.D_OP_ENABLE", 1)
    except ConfigError as exc:
        assert re.match(r"[A-Z_]+\.[A-Z0-9_]+ = 0x[0-9a-f]+: ", str(exc)), str(exc)
    except (UnsupportedError, DramAccessError) as exc:
        assert str(exc)
    assert {b: s for b, s, _ in dla.dram.regions} == before  # no write outside memory


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_random_registers_give_output_or_clear_error(op, preset):
    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(values=_values(OPS[op]), lut=st.lists(st.integers(0, 0xFFFF), max_size=300),
           fit_cbuf=st.booleans())
    def check(values, lut, fit_cbuf):
        _play(op, preset, values, lut, fit_cbuf)

    check()
