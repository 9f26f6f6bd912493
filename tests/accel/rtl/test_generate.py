"""Verilog generation: widths follow from HwConfig (hand-computed here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel.config import get_preset
from accel.rtl.generate import config_from_json, generate_verilog


def test_nv_small_ports(tmp_path: Path) -> None:
    cfg = get_preset("nv_small")
    path = generate_verilog(cfg, tmp_path)
    text = path.read_text()
    assert text.count("module cmac(") == 1
    ports = {p["name"]: (p["direction"], p["width"])
             for p in json.loads((tmp_path / "cmac.ports.json").read_text())}
    # data: 8 lanes x 8 bits + 8 mask bits; weight: + a 3-bit kernel index;
    # result: 8 sums of 16 + log2(8) = 19 bits.
    assert ports["data__payload"] == ("input", 72)
    assert ports["weight__payload"] == ("input", 75)
    assert ports["result__payload"] == ("output", 152)
    assert ports["data__ready"] == ("output", 1) and ports["result__ready"] == ("input", 1)
    assert "output [151:0] result__payload" in text
    assert config_from_json((tmp_path / "cmac.config.json").read_text()) == cfg


def test_unknown_top_lists_tops(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"top 'sdp_rdma' not in cmac, postproc, cacc"):
        generate_verilog(get_preset("nv_small"), tmp_path, top="sdp_rdma")
