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


def test_generated_verilog_is_kept_and_reused(tmp_path: Path, monkeypatch) -> None:
    """A simulation's Verilog comes from the cache when the same top, configuration and
    sources made it before (no elaboration, no Yosys), and is made again for another
    configuration; the files each build directory gets are the generator's."""
    from accel.rtl import sim

    monkeypatch.setattr(sim, "CACHE_DIR", tmp_path / "cache")
    made = []

    def counted(cfg, out_dir, top="cmac", factory=None):
        made.append(cfg.name)
        return generate_verilog(cfg, out_dir, top=top, factory=factory)

    monkeypatch.setattr(sim, "generate_verilog", counted)
    small, large = get_preset("nv_small"), get_preset("nv_large")
    first = sim._generated(small, tmp_path / "a", "cmac", None)
    again = sim._generated(small, tmp_path / "b", "cmac", None)
    assert made == ["nv_small"]
    generate_verilog(small, tmp_path / "plain")
    for name in ("cmac.v", "cmac.ports.json", "cmac.config.json"):
        want = (tmp_path / "plain" / name).read_text()
        assert (first.parent / name).read_text() == want
        assert (again.parent / name).read_text() == want
    other = sim._generated(large, tmp_path / "c", "cmac", None)
    assert made == ["nv_small", "nv_large"]
    assert config_from_json((other.parent / "cmac.config.json").read_text()) == large
