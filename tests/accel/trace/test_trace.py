"""Trace player: parsing, errors with file:line, skips, and a hand-made CRC trace."""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path

import numpy as np
import pytest

from accel.trace.runner import run_trace
from accel.trace.script import TraceError, parse_cfg, parse_dat
from opendla.commands import trace as trace_cmd
from opendla.errors import CheckFailed
from tests.conftest import shared_path

PASS_THROUGH = """\
// 1x1x8 int8 through SDP from memory, output = input
mem_init(pri_mem, 0x80000000, 0x100, ALL_ZERO);
mem_load(pri_mem, 0x80000000, "in.dat");
mem_init(pri_mem, 0x90000000, 0x8, ALL_ZERO);
reg_write(NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0, 0x0);
reg_write(NVDLA_SDP_RDMA.D_DATA_CUBE_CHANNEL_0, 0x7);
reg_write(NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0, 0x80000000);
reg_write(NVDLA_SDP_RDMA.D_SRC_LINE_STRIDE_0, 0x8);
reg_write(NVDLA_SDP_RDMA.D_SRC_SURFACE_STRIDE_0, 0x8);
reg_write(NVDLA_SDP.D_DATA_CUBE_CHANNEL_0, 0x7);
reg_write(NVDLA_SDP.D_DST_BASE_ADDR_LOW_0, 0x90000000);
reg_write(NVDLA_SDP.D_DST_LINE_STRIDE_0, 0x8);
reg_write(NVDLA_SDP.D_DST_SURFACE_STRIDE_0, 0x8);
reg_write(NVDLA_SDP.D_DP_EW_CFG_0, 0x1);
reg_write(NVDLA_SDP.D_CVT_SCALE_0, 0x1);
reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);
reg_write(NVDLA_SDP_RDMA.D_OP_ENABLE_0, 0x1);
intr_notify(SDP_0, sync_id_0);
check_crc(sync_id_0, 1, 0x90000000, 0x8, {crc});
"""
DATA = bytes([1, 0x80, 0x7F, 3, 0xFE, 5, 6, 7])


def _make(tmp_path: Path, text: str, preset: str = "nv_small", dat: bool = True) -> Path:
    d = tmp_path / preset / "t_0"
    d.mkdir(parents=True)
    (d / "t_0.cfg").write_text(text)
    if dat:
        packets = [f"{{offset:0x{i:x}, size:4, payload:" + " ".join(
            f"0x{b:02x}" for b in DATA[i:i + 4]) + "} ," for i in (0, 4)]
        (d / "in.dat").write_text("{\n" + "\n".join(packets) + "\n}\n")
    return d


def test_parse_cfg_drops_comments_and_keeps_line_numbers(tmp_path):
    p = tmp_path / "x.cfg"
    p.write_text('// c\nmem_load(pri_mem, 0x10, "a.dat");\n\n'
                 'check_crc(s, 1, 0x0, 0x8, 0x1); //MC\n')
    cmds = parse_cfg(p)
    assert [(c.name, c.args, c.line) for c in cmds] == [
        ("mem_load", ["pri_mem", "0x10", "a.dat"], 2),
        ("check_crc", ["s", "1", "0x0", "0x8", "0x1"], 4)]


def test_parse_dat_packets(tmp_path):
    p = tmp_path / "a.dat"
    p.write_text("{\n{offset:0x4, size:2, payload:0x01 0xff} ,\n{offset:0x0, size:1, "
                 "payload:0x80}\n}\n")
    offs, data = parse_dat(p)
    assert offs.tolist() == [4, 5, 0] and data.tolist() == [1, 255, 128]


def test_parse_dat_checks_every_packet_size(tmp_path):
    # the totals agree (2 + 1 bytes declared, 1 + 2 carried): the packet at 0x4 is named
    p = tmp_path / "a.dat"
    p.write_text("{\n{offset:0x4, size:2, payload:0x01} ,\n{offset:0x0, size:1, "
                 "payload:0x80 0x81}\n}\n")
    with pytest.raises(TraceError, match=r"offset 0x4 declares size 2 but carries 1"):
        parse_dat(p)


def test_parse_dat_without_0x_prefixes(tmp_path):
    p = tmp_path / "a.dat"
    p.write_text("{offset:16, size:3, payload:01,ff,7e}")
    offs, data = parse_dat(p)
    assert offs.tolist() == [16, 17, 18] and data.tolist() == [1, 255, 126]


def test_hand_made_trace_passes_with_independent_crc(tmp_path):
    crc = zlib.crc32(DATA)  # SDP with unit scale passes int8 data through unchanged
    res = run_trace(_make(tmp_path, PASS_THROUGH.format(crc=hex(crc))))
    assert (res.status, res.reason, res.preset) == ("pass", "", "nv_small")
    assert res.cycles > 0 and res.seconds > 0


def test_wrong_crc_fails_naming_file_line(tmp_path):
    res = run_trace(_make(tmp_path, PASS_THROUGH.format(crc="0x12345678")))
    assert res.status == "fail"
    assert "t_0.cfg:19: CRC of [0x90000000, +0x8)" in res.reason
    assert "golden 0x12345678" in res.reason


def test_unknown_register_error_names_file_line_and_symbol(tmp_path):
    text = PASS_THROUGH.format(crc="0x0").replace("D_CVT_SCALE_0", "D_CVT_SCALEE_0")
    res = run_trace(_make(tmp_path, text))
    assert res.status == "fail"
    assert "t_0.cfg:15: unknown register 'NVDLA_SDP.D_CVT_SCALEE_0'" in res.reason
    assert "did you mean NVDLA_SDP.D_CVT_SCALE_0" in res.reason


def test_missing_data_file_skips(tmp_path):
    res = run_trace(_make(tmp_path, PASS_THROUGH.format(crc="0x0"), dat=False))
    assert (res.status, res.reason) == ("skip", "missing data: in.dat")


def test_unit_missing_from_the_preset_skips_never_passes(tmp_path):
    text = "mem_init(pri_mem, 0x0, 0x10, ALL_ZERO);\nreg_write(NVDLA_RBK.D_OP_ENABLE_0, 0x1);\n"
    res = run_trace(_make(tmp_path, text))  # an nv_small trace: no Rubik there
    assert res.status == "skip" and "nv_small has no Rubik" in res.reason


def test_interrupt_never_raised_fails(tmp_path):
    text = PASS_THROUGH.format(crc="0x0").replace(
        "reg_write(NVDLA_SDP_RDMA.D_OP_ENABLE_0, 0x1);\n", "")
    res = run_trace(_make(tmp_path, text))
    assert res.status == "fail" and "interrupt SDP_0 was never raised" in res.reason


def test_cli_table_and_exit_code(tmp_path, capsys):
    good = _make(tmp_path, PASS_THROUGH.format(crc=hex(zlib.crc32(DATA))))
    args = argparse.Namespace(paths=[str(good.parent)], preset=None, json=False)
    assert trace_cmd.run(args) == 0
    out = capsys.readouterr().out
    assert "t_0" in out and "pass" in out and "1 passed, 0 failed, 0 skipped" in out
    bad = _make(tmp_path / "b", PASS_THROUGH.format(crc="0x1"))
    with pytest.raises(CheckFailed, match="1 trace"):       # exit status 1 in opendla.cli
        trace_cmd.run(argparse.Namespace(paths=[str(bad)], preset="nv_small", json=True))
    assert '"result": "fail"' in capsys.readouterr().out


def test_official_pass_through_trace_crc():
    # the golden CRC in the NVDLA trace is the reference for our zlib.crc32 region check
    d = shared_path("nvdla", "traces", "nv_small", "sdp_1x1x8_pass_through_int8_0")
    res = run_trace(d)
    assert res.status == "pass", res.reason
    assert np.isfinite(res.seconds)


def test_y_stage_on_nv_small_passes_with_note_in_table_and_json(tmp_path, capsys):
    # EW ALU SUM with register operand 3, identity operand converter: every byte + 3
    ew = ("reg_write(NVDLA_SDP.D_DP_EW_CFG_0, 0x58);\n"  # ALU SUM, MUL and LUT bypassed
          "reg_write(NVDLA_SDP.D_DP_EW_ALU_SRC_VALUE_0, 0x3);\n"
          "reg_write(NVDLA_SDP.D_DP_EW_ALU_CVT_SCALE_VALUE_0, 0x1);\n"
          "reg_write(NVDLA_SDP.D_DP_EW_MUL_CVT_SCALE_VALUE_0, 0x1);\n")
    plus3 = bytes([4, 0x83, 0x7F, 6, 0x01, 8, 9, 10])  # 127+3 saturates to 127
    text = PASS_THROUGH.format(crc=hex(zlib.crc32(plus3))).replace(
        "reg_write(NVDLA_SDP.D_DP_EW_CFG_0, 0x1);\n", ew)
    d = _make(tmp_path, text)
    res = run_trace(d)
    assert (res.status, res.reason) == ("pass", "")
    assert res.note == "Y stage modelled: nv_small goldens include SDP_EW"
    strict = run_trace(d, strict=True)
    assert strict.status == "skip" and "nv_small has no SDP_EW" in strict.reason
    args = argparse.Namespace(paths=[str(d)], preset=None, json=False)
    assert trace_cmd.run(args) == 0
    out = capsys.readouterr().out
    assert "Y stage modelled: nv_small goldens include SDP_EW" in out
    assert "1 passed (1 with a note)" in out
    args = argparse.Namespace(paths=[str(d)], preset=None, json=True)
    assert trace_cmd.run(args) == 0
    assert '"note": "Y stage modelled: nv_small goldens include SDP_EW"' in capsys.readouterr().out
