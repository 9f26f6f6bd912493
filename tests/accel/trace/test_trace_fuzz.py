"""Fuzz the trace parser and player with mutated .cfg/.dat files.

A mutated trace must end as a TraceResult with status pass/fail/skip and a
reason - never an exception escaping ``run_trace``, a hang, or a pass without
a CRC match (the mutated CRCs cannot match by construction of the check).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.trace.runner import run_trace
from accel.trace.script import TraceError, parse_cfg, parse_dat

CFG = """mem_init(pri_mem, 0x1000, 0x100, ALL_ZERO);
mem_load(pri_mem, 0x1000, "in.dat");
reg_write(NVDLA_CDP.D_DATA_FORMAT_0, 0x0);
reg_write(NVDLA_CDP_RDMA.D_DATA_FORMAT_0, 0x0);
reg_write(NVDLA_CDP_RDMA.D_SRC_BASE_ADDR_LOW_0, 0x1000);
reg_write(NVDLA_CDP_RDMA.D_SRC_LINE_STRIDE_0, 0x8);
reg_write(NVDLA_CDP_RDMA.D_SRC_SURFACE_STRIDE_0, 0x8);
reg_write(NVDLA_CDP.D_DST_BASE_ADDR_LOW_0, 0x1080);
reg_write(NVDLA_CDP.D_DATOUT_SCALE_0, 0x1);
reg_write(NVDLA_CDP.D_DATIN_SCALE_0, 0x1);
reg_write(NVDLA_CDP_RDMA.D_OP_ENABLE_0, 0x1);
reg_write(NVDLA_CDP.D_OP_ENABLE_0, 0x1);
intr_notify(CDP_0, sync0);
check_crc(sync0, pri_mem, 0x1080, 0x8, 0x12345678);
"""
DAT = "{\n{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04} ,\n}\n"
ALPHABET = "(),;{}:0x1f \n\"_.ANVDL"
TOKENS = st.sampled_from(["0x", "//", "size", "9999999999", "0xZZ", "-1", ""])


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    for pos, cut, ins in edits:
        pos %= len(text) + 1
        text = text[:pos] + ins + text[pos + cut:]
    return text


EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 6),
                           st.one_of(st.text(ALPHABET, max_size=6), TOKENS)), max_size=6)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cfg_edits=EDITS, dat_edits=EDITS)
def test_mutated_trace_is_a_result_never_a_crash(tmp_path_factory, cfg_edits, dat_edits):
    d = Path(tmp_path_factory.mktemp("nv_small")) / "fuzz"
    d.mkdir()
    (d / "fuzz.cfg").write_text(_mutate(CFG, cfg_edits))
    (d / "in.dat").write_text(_mutate(DAT, dat_edits))
    res = run_trace(d, preset="nv_small")
    assert res.status in ("fail", "skip"), res  # the golden CRC above is wrong on purpose
    # a clear trace error ("file:line: ...") or skip reason, not a model bug caught generically
    assert res.reason and not re.match(r"[A-Za-z]+(Error|Exception): ", res.reason), res.reason


@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=st.lists(st.one_of(st.text(ALPHABET, max_size=8), TOKENS), max_size=40).map("".join))
def test_parsers_raise_only_trace_errors(tmp_path_factory, text):
    p = Path(tmp_path_factory.mktemp("p")) / "x.cfg"
    p.write_text(text)
    for parse in (parse_cfg, parse_dat):
        try:
            parse(p)
        except TraceError as exc:
            assert str(exc)
