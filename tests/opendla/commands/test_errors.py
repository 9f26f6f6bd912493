"""One error convention for every command: ``error: ...`` on stderr, exit 2 for bad
input, 1 for a failed check, no traceback, choices listed in ``--help``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from opendla.cli import main
from tests.conftest import shared_path

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")


def _error(capsys, args: list[str], code: int = 2) -> str:
    assert main(args) == code, args
    cap = capsys.readouterr()
    assert cap.err.startswith("error: ") and "Traceback" not in cap.err, cap.err
    return cap.err


def test_trace_run_without_traces_is_an_error(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no trace under" in _error(capsys, ["trace", "run", str(empty)])
    assert "does not exist" in _error(capsys, ["trace", "run", str(tmp_path / "typo")])
    (tmp_path / "f.cfg").write_text("")
    assert "is not a directory" in _error(capsys, ["trace", "run", str(tmp_path / "f.cfg")])
    assert capsys.readouterr().out == ""          # no table header before the error


def test_trace_reasons_are_printed_whole(capsys):
    """--strict skips nv_small's SDP_EW traces with a reason longer than a table cell."""
    root = shared_path("nvdla", "traces", "nv_small")
    ew = sorted(p for p in root.iterdir() if "_ew_" in p.name)[:1]
    assert ew, "no SDP_EW trace in ../shared"
    assert main(["trace", "run", "--strict", str(ew[0])]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith(ew[0].name))
    reason = " ".join(line.strip() for line in lines[row + 1:-1])
    assert "skip" in lines[row] and len(reason) > 60 and not reason.endswith("...")


def test_trace_json_into_a_closed_pipe_is_quiet():
    root = shared_path("nvdla", "traces", "nv_small")
    cmd = (f"{sys.executable} -m opendla.cli trace run --json {root} | head -1")
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          text=True, timeout=300)
    assert proc.stdout.strip() == "{" and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0


def test_unwritable_outputs_are_clean_errors(tmp_path, capsys):
    assert "cannot create" in _error(capsys, ["rtl", "generate", "-o", "/proc/x"])
    assert "cannot create" in _error(capsys, ["fpga", "build", "-o", "/proc/x/y"])
    import numpy as np
    from sklearn.datasets import load_digits

    np.save(tmp_path / "x.npy", (load_digits().images[:8] / 16).astype(np.float32)[:, None])
    assert main(["quantize", LENET, "-i", str(tmp_path / "x.npy"), "-o",
                 str(tmp_path / "calib.json")]) == 0
    blocker = tmp_path / "file"
    blocker.write_text("")
    err = _error(capsys, ["compile", LENET, "--calib", str(tmp_path / "calib.json"), "-o",
                          str(blocker / "out")])
    assert "cannot write loadables" in err and str(blocker) in err


def test_inspect_errors_go_to_stderr_with_exit_2(tmp_path, capsys):
    assert "No such file" in _error(capsys, ["inspect", str(tmp_path / "none.nvdla")])
    (tmp_path / "short.nvdla").write_bytes(b"\x01\x02")
    assert "a flatbuffer needs at least 8" in _error(capsys, ["inspect",
                                                             str(tmp_path / "short.nvdla")])


@pytest.mark.parametrize("command, option, choices", [
    (["run"], "--device", "{cpu,nvdla}"),
    (["run"], "--preset", "nv_small,nv_small_256"),
    (["compile"], "--preset", "nv_small,nv_small_256"),
    (["compare"], "--preset", "nv_small,nv_small_256"),
    (["eval"], "--device", "{nvdla,cpu}"),
    (["fpga", "build"], "--board", "ulx3s-85f"),
    (["trace", "run"], "--preset", "nv_small,nv_small_256"),
    (["rtl", "test"], "--simulator", "{icarus,verilator}"),
])
def test_help_lists_the_choices(capsys, command, option, choices):
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert option in text and choices in text.replace("\n", "").replace(" ", "")


def test_no_python_argument_names_in_messages(tmp_path, capsys):
    trace = tmp_path / "odd_parent" / "t0"
    trace.mkdir(parents=True)
    (trace / "input.cfg").write_text("")
    err = _error(capsys, ["trace", "run", str(trace)])
    assert "--preset" in err and "preset=" not in err
    err = _error(capsys, ["run", str(tmp_path / "m.onnx"), "--input", "x.npy"])
    assert "=" not in err.replace("NAME=", "")
