"""The environment :func:`accel.rtl.sim.run_cocotb` gives cocotb: which files it has pytest
rewrite the asserts of, judged by the matcher pytest's rewriting hook itself uses."""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest
from _pytest.pathlib import fnmatch_ex

from accel.rtl.sim import DEFAULT_TB_DIR, icarus_source, rewritten_asserts


def _rewritten(patterns: str, path: Path) -> bool:
    return any(fnmatch_ex(p, path) for p in patterns.split())


def test_only_the_testbenches_have_their_asserts_rewritten(monkeypatch) -> None:
    monkeypatch.delenv("COCOTB_REWRITE_ASSERTION_FILES", raising=False)
    patterns = rewritten_asserts("my_bench")
    for tb in ("trace_tb.py", "conv_tb.py", "engine_tb.py"):     # and what they import
        assert _rewritten(patterns, DEFAULT_TB_DIR / tb)
    assert _rewritten(patterns, Path("/elsewhere/my_bench.py"))  # the module under test
    # what the simulation imports besides: cocotb's default ``*.py`` rewrote all of it
    for module in (Path(numpy.__file__), Path(pytest.__file__),
                   DEFAULT_TB_DIR.parents[1] / "accel" / "cmod" / "dla.py"):
        assert _rewritten("*.py", module) and not _rewritten(patterns, module)


def test_a_users_setting_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("COCOTB_REWRITE_ASSERTION_FILES", "*.py")
    assert rewritten_asserts("trace_tb") == "*.py"


def test_icarus_copies_raise_every_always_block_trigger(tmp_path) -> None:
    """Each Yosys trigger (``reg \\$auto$verilog_backend...  = 0;``, read at the head of the
    module's ``always @*`` blocks) is set to 1 at time 1 in Icarus's copy; a source without
    one is compiled as it is.  (Without it the ``engine_ram`` top's read channel held X in
    a convolution trace: ``tests/rtl/test_traces_rtl.py``'s block-RAM test.)"""
    triggers = [rf"\$auto$verilog_backend.cc:2505:dump_module${i}" for i in (1, 2)]
    source = tmp_path / "two.v"
    source.write_text("".join(
        f"module m{i}(input a, output reg o);\n  reg {t}  = 0;\n"
        f"  always @* begin\n    if ({t} ) begin end\n    o = a;\n  end\nendmodule\n"
        for i, t in enumerate(triggers)))
    copy = icarus_source(source)
    assert copy != source and copy.parent == source.parent
    text = copy.read_text()
    for t in triggers:
        assert f"  reg {t} = 0;\n  initial #1 {t} = 1;\n" in text
    assert text.count("initial") == len(triggers)
    assert text.count("always @*") == len(triggers)
    plain = tmp_path / "plain.v"
    plain.write_text("module p(input a, output o);\n  assign o = a;\nendmodule\n")
    assert icarus_source(plain) == plain
