"""The environment :func:`accel.rtl.sim.run_cocotb` gives cocotb: which files it has pytest
rewrite the asserts of, judged by the matcher pytest's rewriting hook itself uses."""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest
from _pytest.pathlib import fnmatch_ex

from accel.rtl.sim import DEFAULT_TB_DIR, rewritten_asserts


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
