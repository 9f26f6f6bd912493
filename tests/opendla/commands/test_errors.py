"""One error convention for every command: ``error: ...`` on stderr, exit 2 for bad
input, 1 for a failed check, no traceback, choices listed in ``--help``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from opendla.cli import build_parser, main
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


def _subcommand_paths(parser: argparse.ArgumentParser, words: tuple = ()):
    """Every command and subcommand of ``parser``, as the words that name it."""
    yield words
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommand_paths(sub, (*words, name))


def test_every_command_prints_its_help(capsys):
    """``--help`` of every command and subcommand exits 0 (a bare ``%`` in a help text
    made argparse raise a TypeError instead: ``quantize --help`` did so)."""
    paths = list(_subcommand_paths(build_parser()))
    assert len(paths) > 12, paths
    for words in paths:
        with pytest.raises(SystemExit) as exc:
            main([*words, "--help"])
        assert exc.value.code == 0, words
        assert "usage: opendla" in capsys.readouterr().out, words


def test_no_python_argument_names_in_messages(tmp_path, capsys):
    trace = tmp_path / "odd_parent" / "t0"
    trace.mkdir(parents=True)
    (trace / "input.cfg").write_text("")
    err = _error(capsys, ["trace", "run", str(trace)])
    assert "--preset" in err and "preset=" not in err
    err = _error(capsys, ["run", str(tmp_path / "m.onnx"), "--input", "x.npy"])
    assert "=" not in err.replace("NAME=", "")


# ------------------------------------------------------------------ one error tree
def _project_exception_classes() -> list[tuple[str, str]]:
    """``(module, class)`` of every exception class defined in accel, tengine_host and fpga,
    found in the source (a class whose bases name an Error, Exception, Fault or Mismatch)."""
    import ast

    root = Path(__file__).resolve().parents[3]
    found = []
    for package in ("accel", "tengine_host", "fpga"):
        for path in sorted((root / package).rglob("*.py")):
            if "nvdla/loadable" in path.as_posix():     # generated flatbuffer code
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(b, ast.Name) and b.id.endswith(
                            ("Error", "Exception", "Fault", "Mismatch", "Failed", "Diverged"))
                        for b in node.bases):
                    module = ".".join(path.relative_to(root).with_suffix("").parts)
                    found.append((module.removesuffix(".__init__"), node.name))
    return found


def test_every_project_exception_derives_from_its_package_base():
    import importlib

    from accel.errors import AccelError
    from fpga.errors import FpgaError
    from tengine_host.errors import TengineError

    bases = {"accel": AccelError, "tengine_host": TengineError, "fpga": FpgaError}
    classes = _project_exception_classes()
    assert len(classes) >= 25, classes          # the scan found them (27 before the tree)
    wrong = [f"{m}.{c}" for m, c in classes
             if not issubclass(getattr(importlib.import_module(m), c), bases[m.split(".")[0]])]
    assert not wrong, f"not under their package base: {wrong}"


def test_exit_statuses_are_mapped_in_one_place():
    from accel.backends.rtl import RtlMismatch
    from accel.cmod.errors import ConfigError
    from accel.compiler import CompileError
    from accel.loadable.io import LoadableError
    from accel.trace.script import MalformedTrace, TraceError
    from opendla.errors import CheckFailed, UsageError, exit_status
    from tengine_host.errors import TengineInputError
    from tengine_host.frontend import OnnxImportError

    assert exit_status(UsageError("x")) == 2 and exit_status(CheckFailed("x")) == 1
    for bad_input in (TengineInputError("x"), OnnxImportError("x"), LoadableError("x"),
                      MalformedTrace("x"), ConfigError("CDP", "R", 1, "why"),
                      CompileError("x")):
        assert exit_status(bad_input) == 2, bad_input
    assert exit_status(RtlMismatch("x")) == 1
    # bugs keep their traceback: built-ins, and package errors that are not about input
    for bug in (ValueError("x"), KeyError("x"), IndexError("x"), TypeError("x"),
                TraceError("x")):
        assert exit_status(bug) is None, bug


def test_an_internal_error_keeps_its_traceback(monkeypatch):
    """A KeyError inside a command is a bug: main must not turn it into a usage error."""
    import opendla.commands.trace as trace_command

    def broken(args):
        raise KeyError("internal")

    monkeypatch.setattr(trace_command, "run", broken)
    with pytest.raises(KeyError, match="internal"):
        main(["trace", "run", "."])


def _trace(root: Path, name: str, lines: list[str]) -> Path:
    t = root / "nv_small" / name
    t.mkdir(parents=True)
    (t / f"{name}.cfg").write_text("\n".join(lines) + "\n")
    return t


def test_malformed_traces_are_bad_input_and_failed_checks_exit_1(tmp_path, capsys):
    """Malformed trace files exited 1 like a CRC mismatch; they are bad input (2)."""
    head = ["mem_init(pri_mem, 0x80000000, 0x100, ALL_ZERO);"]
    garbage = _trace(tmp_path, "garbage", [*head, "not a statement"])
    err = _error(capsys, ["trace", "run", str(garbage)])
    assert "malformed" in err and "garbage" in err
    unknown = _trace(tmp_path, "unknown", [*head, "reg_write(NVDLA_CDP.NO_SUCH_0, 0x1);",
                                          "check_crc(done, 1, pri_mem, 0x80000000, 0x100, 0x0);"])
    assert "malformed" in _error(capsys, ["trace", "run", str(unknown)])
    # a well-formed trace that runs and fails a check (the interrupt it waits for is
    # never raised: nothing was started) is a failed check, not bad input
    fails = _trace(tmp_path, "fails", [*head, "intr_notify(CDP_0, done);",
                                       "check_crc(done, 1, pri_mem, 0x80000000, 0x100, 0x0);"])
    err = _error(capsys, ["trace", "run", str(fails)], code=1)
    assert "1 trace(s) failed: fails" in err


def test_file_errors_name_the_file_once(tmp_path, capsys):
    """OS errors repeated the path the message already gave ('...': [Errno 21] Is a
    directory: '...'); an error about another file still names that one."""
    from tengine_host.errors import reason

    err = _error(capsys, ["compile", LENET, "--calib", str(tmp_path), "-o", str(tmp_path)])
    assert err.count(str(tmp_path)) == 1 and "Is a directory" in err, err
    err = _error(capsys, ["run", LENET, "--input", str(tmp_path / "none.npy")])
    assert err.count("none.npy") == 1 and "No such file" in err, err
    try:
        (tmp_path / "missing" / "f").read_text()
    except OSError as exc:
        assert reason(exc, tmp_path / "missing" / "f") == "No such file or directory"
        assert reason(exc, tmp_path) == f"No such file or directory ({tmp_path}/missing/f)"


@pytest.mark.parametrize("content, says", [(b"", "holds no ONNX graph"),
                                           (b"garbage\n", "not a valid ONNX model")])
def test_an_empty_or_corrupt_model_file_is_named_by_every_command(tmp_path, capsys, content,
                                                                  says):
    """An empty file parses as an empty ModelProto: ``run`` and ``compare``, which read
    the model's input names before importing it, said "the model has inputs : use
    NAME=FILE" instead of naming the file."""
    import numpy as np

    model = tmp_path / "m.onnx"
    model.write_bytes(content)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 28, 28), np.float32))
    calib = tmp_path / "calib.json"
    calib.write_text("{}")
    for args in (["run", str(model), "--input", str(x)],
                 ["compare", str(model), "--input", str(x), "--calib", str(calib)],
                 ["quantize", str(model), "-i", str(x), "-o", str(tmp_path / "t.json")],
                 ["compile", str(model), "--calib", str(calib), "-o", str(tmp_path / "out")]):
        err = _error(capsys, args)
        assert says in err and str(model) in err, (args, err)
