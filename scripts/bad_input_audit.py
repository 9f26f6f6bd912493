"""Feed ``opendla`` bad input and classify how each command reacts.

Every case runs ``python -m opendla.cli ...`` in a subprocess with a timeout and
is classified as

* ``clean``: exit status 2 and exactly one ``error:`` line on stderr (a case that
  expects a warning instead: exit 0 and a ``warning:`` line naming the saturation);
* ``traceback``: a Python traceback on stderr;
* ``hang``: still running at the timeout;
* ``silent``: exit 0 (or the output of a wrong conversion) where the command should
  have refused or warned;
* ``other``: anything else (another exit status, several ``error:`` lines, an
  ``error:`` line that names no file where a file is at fault).

The fixtures (a LeNet model, its calibration table and loadable, images in every
PIL mode, trace directories) are made in a temporary directory; nothing under
``../shared`` is needed.  ``--fast`` runs the subset the test suite uses.

    python scripts/bad_input_audit.py [--fast] [--json] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LENET = ROOT / "tengine_host" / "models" / "lenet5_digits.onnx"

#: what a case expects: a refusal (exit 2, one ``error:`` line) or a warning (exit 0)
REFUSE, WARN = "refuse", "warn"


@dataclass
class Case:
    """One bad input: the ``opendla`` arguments and what a correct reaction is.

    ``args`` may use ``{d}`` for the fixture directory.  ``names`` is a text the
    error line must contain (the file or value at fault).  ``same_as``: arguments of
    a good run whose saved outputs the bad run must reproduce (an image in another
    mode holding the same values); ``fast`` marks the subset the tests run."""

    name: str
    args: list[str]
    expect: str = REFUSE
    names: str = ""
    same_as: list[str] | None = None
    fast: bool = False


@dataclass
class Outcome:
    case: Case
    verdict: str
    status: int | None
    detail: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------ fixtures
def _digits() -> np.ndarray:
    from sklearn.datasets import load_digits

    return (load_digits().images[:16] / 16).astype(np.float32)[:, None]


def _opendla(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "opendla.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def _write_table(d: Path, name: str, change: Callable[[dict], None]) -> None:
    doc = json.loads((d / "calib.json").read_text())
    change(doc)
    (d / name).write_text(json.dumps(doc))


def _set_first(key: str | None, value) -> Callable[[dict], None]:
    """A change to the table's first tensor entry: ``key`` set to ``value``, or (``key``
    None) the whole entry replaced by ``value``."""
    def change(doc: dict) -> None:
        first = next(k for k in sorted(doc) if not k.startswith("__"))
        if key is None:
            doc[first] = value
        else:
            doc[first][key] = value
    return change


def _images(d: Path) -> None:
    """One digit as an 8x8 image in several PIL modes, each holding the same values."""
    from PIL import Image

    grey = np.round(_digits()[0, 0] * 255).astype(np.uint8)           # 0..255
    Image.fromarray(grey, "L").save(d / "digit_L.png")
    Image.fromarray(grey.astype(np.uint16) * 257).save(d / "digit_I16.png")      # I;16
    Image.fromarray(grey.astype(np.int32) * 257).save(d / "digit_I.tiff")         # I
    Image.fromarray(grey.astype(np.float32)).save(d / "digit_F.tiff")             # F
    Image.fromarray(grey, "L").convert("LA").save(d / "digit_LA.png")
    Image.fromarray(grey, "L").convert("P").save(d / "digit_P.png")
    (d / "not_an_image.png").write_text("hello")
    (d / "imgs_zero").mkdir(exist_ok=True)
    Image.fromarray(grey, "L").save(d / "imgs_zero" / "a.png")


def _traces(d: Path, timeout: float) -> None:
    """Trace directories named after a preset (``nv_small``), each with one defect."""
    root = d / "traces" / "nv_small"
    good = ["mem_init(pri_mem, 0x80000000, 0x100, ALL_ZERO);",
            "reg_write(NVDLA_CDP.S_POINTER_0, 0x0);",
            "check_crc(intr, 1, pri_mem, 0x80000000, 0x100, 0x0);"]
    defects = {
        "garbage_line": [good[0], "this is not a command", *good[1:]],
        "unknown_command": [good[0], "frobnicate(1, 2);", *good[1:]],
        "unknown_register": [good[0], "reg_write(NVDLA_CDP.NO_SUCH_REG_0, 0x1);", good[2]],
        "no_check": good[:2],
        "bad_value": [good[0], "reg_write(NVDLA_CDP.S_POINTER_0, 0xZZ);", good[2]],
    }
    for name, lines in defects.items():
        t = root / name
        t.mkdir(parents=True, exist_ok=True)
        (t / f"{name}.cfg").write_text("\n".join(lines) + "\n")
    two = root / "two_cfgs"
    two.mkdir(parents=True, exist_ok=True)
    (two / "a.cfg").write_text("\n".join(good) + "\n")
    (two / "b.cfg").write_text("\n".join(good) + "\n")


def _rgb_model(path: Path) -> None:
    """A small 3-channel model (conv, ReLU, global average pool) for RGB image cases."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).normal(size=(4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["p"]),
         helper.make_node("Flatten", ["p"], ["y"])],
        "rgb", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def make_fixtures(d: Path, timeout: float, loadable: bool = True) -> None:
    """Every case's files in ``d``; ``loadable`` False skips compiling the loadable (the
    slowest fixture, which only the loadable cases use)."""
    _rgb_model(d / "rgb.onnx")
    x = _digits()
    np.save(d / "x.npy", x)
    np.save(d / "x1.npy", x[:1])
    np.save(d / "nan.npy", np.full_like(x[:1], np.nan))
    inf = x[:1].copy()
    inf[0, 0, 0, 0] = np.inf
    np.save(d / "inf.npy", inf)
    np.save(d / "huge.npy", x[:1] * 1e30)
    np.save(d / "past_float32.npy", x[:1].astype(np.float64) * 1e300)
    np.savez(d / "extra_array.npz", input=x[:1], labels=np.zeros(1))
    (d / "a_file.txt").write_text("")
    labels = np.arange(len(x)) % 10
    np.savez(d / "eval_huge.npz", x=x * 1e30, y=labels)
    nan = x.copy()
    nan[3, 0, 0, 0] = np.nan
    np.savez(d / "eval_nan.npz", x=nan, y=labels)
    np.save(d / "shape.npy", np.zeros((1, 1, 5, 5), np.float32))
    np.save(d / "strings.npy", np.array(["a", "b"]))
    np.save(d / "complex.npy", x[:1].astype(np.complex64))
    np.save(d / "empty.npy", np.zeros((0, 1, 8, 8), np.float32))
    (d / "corrupt.npy").write_bytes(b"\x93NUMPY garbage")
    (d / "corrupt.npz").write_bytes(b"PK\x03\x04 not really a zip")
    (d / "corrupt.onnx").write_bytes(os.urandom(64))
    (d / "empty.onnx").write_bytes(b"")
    (d / "text.onnx").write_text("ir_version: 7\n")
    (d / "a_dir").mkdir(exist_ok=True)
    (d / "empty_labels.txt").write_text("\n\n")
    (d / "corrupt.json").write_text("{ not json")
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "short.nvdla").write_bytes(b"\x00" * 4)
    proc = _opendla(["quantize", str(LENET), "-i", str(d / "x.npy"), "-o", str(d / "calib.json"),
                     "--no-progress"], timeout)
    if proc.returncode:
        raise SystemExit(f"fixture: quantize failed:\n{proc.stderr}")
    if loadable:
        proc = _opendla(["compile", str(LENET), "--calib", str(d / "calib.json"), "-o",
                         str(d / "compiled")], timeout)
        if proc.returncode:
            raise SystemExit(f"fixture: compile failed:\n{proc.stderr}")
        blob = sorted((d / "compiled").glob("*.nvdla"))[0].read_bytes()
        (d / "model.nvdla").write_bytes(blob)
        (d / "truncated.nvdla").write_bytes(blob[:len(blob) // 2])
    for name, change in {
        "scale_null.json": _set_first("scale", None),
        "scale_list.json": _set_first("scale", [0.1]),
        "scale_dict.json": _set_first("scale", {"v": 0.1}),
        "scale_text.json": _set_first("scale", "big"),
        "scale_bool.json": _set_first("scale", True),
        "min_text.json": _set_first(None, {"min": "low", "max": 1.0}),
        "max_null.json": _set_first("max", None),
        "zp_float.json": _set_first("zero_point", 1.5),
        "zp_text.json": _set_first("zero_point", "3"),
        "entry_list.json": _set_first(None, [1]),
        "other_model.json": lambda doc: [doc.pop(k) for k in sorted(doc)[:3]],
    }.items():
        _write_table(d, name, change)
    _images(d)
    _traces(d, timeout)


# ------------------------------------------------------------------ cases
def cases() -> list[Case]:
    m = str(LENET)
    run8 = ["run", m, "--precision", "int8", "--calib", "{d}/calib.json"]
    nv = ["run", m, "--device", "nvdla", "--calib", "{d}/calib.json"]
    cmp = ["compare", m, "--calib", "{d}/calib.json", "--no-progress"]
    out: list[Case] = []
    # calibration tables with entries of the wrong type, on every command that reads one
    for table, cmd in (("scale_null", "run"), ("scale_list", "compile"), ("scale_dict", "compare"),
                       ("scale_text", "run"), ("scale_bool", "compile"), ("min_text", "run"),
                       ("max_null", "compile"), ("zp_float", "run"), ("zp_text", "compare"),
                       ("entry_list", "run")):
        base = {"run": ["run", m, "--precision", "int8", "--input", "{d}/x1.npy"],
                "compile": ["compile", m, "-o", "{d}/out"],
                "compare": ["compare", m, "--input", "{d}/x1.npy", "--no-progress"]}[cmd]
        out.append(Case(f"table {table} ({cmd})", [*base, "--calib", f"{{d}}/{table}.json"],
                        names=f"{table}.json", fast=table in ("scale_null", "zp_float")))
    for table in ("corrupt", "list"):
        out.append(Case(f"table {table}.json", ["compile", m, "--calib", f"{{d}}/{table}.json",
                                                "-o", "{d}/out"], names=f"{table}.json"))
    out += [
        Case("table is a directory", ["compile", m, "--calib", "{d}/a_dir", "-o", "{d}/out"],
             names="a_dir"),
        Case("table missing", ["compile", m, "--calib", "{d}/none.json", "-o", "{d}/out"],
             names="none.json"),
        Case("table of another model", ["compile", m, "--calib", "{d}/other_model.json", "-o",
                                        "{d}/out"], names="other_model.json"),
        # arrays
        Case("npy corrupt", [*run8, "--input", "{d}/corrupt.npy"], names="corrupt.npy"),
        Case("npz corrupt", [*run8, "--input", "{d}/corrupt.npz"], names="corrupt.npz"),
        Case("npy wrong shape", [*run8, "--input", "{d}/shape.npy"]),
        Case("npy of strings", [*run8, "--input", "{d}/strings.npy"], names="strings.npy"),
        Case("npy complex", [*run8, "--input", "{d}/complex.npy"], names="complex.npy"),
        Case("npy no sample", [*run8, "--input", "{d}/empty.npy"]),
        Case("input is a directory", [*run8, "--input", "{d}/a_dir"], names="a_dir"),
        Case("input missing", [*run8, "--input", "{d}/none.npy"], names="none.npy"),
        # NaN / Inf / saturation
        Case("NaN run int8 cpu", [*run8, "--input", "{d}/nan.npy"], fast=True),
        Case("Inf run int8 cpu", [*run8, "--input", "{d}/inf.npy"]),
        Case("NaN run nvdla", [*nv, "--input", "{d}/nan.npy"]),
        Case("NaN compare", [*cmp, "--input", "{d}/nan.npy"]),
        Case("NaN quantize", ["quantize", m, "-i", "{d}/nan.npy", "-o", "{d}/t.json",
                              "--no-progress"]),
        Case("x1e30 run int8", [*run8, "--input", "{d}/huge.npy"], expect=WARN, fast=True),
        Case("x1e30 run nvdla", [*nv, "--input", "{d}/huge.npy"], expect=WARN),
        Case("x1e30 compare", [*cmp, "--input", "{d}/huge.npy"], expect=WARN),
        Case("NaN eval", ["eval", m, "--calib", "{d}/calib.json", "--data", "{d}/eval_nan.npz",
                          "--workers", "0", "--no-progress"]),
        Case("x1e30 eval", ["eval", m, "--calib", "{d}/calib.json", "--data",
                            "{d}/eval_huge.npz", "--workers", "0", "--no-progress"],
             expect=WARN),
        # images
        Case("16-bit PNG (I;16)", [*run8, "--image", "{d}/digit_I16.png", "--save-outputs",
                                   "{d}/o_bad"], expect="same",
             same_as=[*run8, "--image", "{d}/digit_L.png", "--save-outputs", "{d}/o_good"]),
        Case("32-bit TIFF (I)", [*run8, "--image", "{d}/digit_I.tiff", "--save-outputs",
                                "{d}/o_bad"], expect="same",
             same_as=[*run8, "--image", "{d}/digit_L.png", "--save-outputs", "{d}/o_good"]),
        Case("float TIFF (F)", [*run8, "--image", "{d}/digit_F.tiff", "--save-outputs",
                                "{d}/o_bad"], expect="same",
             same_as=[*run8, "--image", "{d}/digit_L.png", "--save-outputs", "{d}/o_good"]),
        Case("grey+alpha PNG (LA)", [*run8, "--image", "{d}/digit_LA.png", "--save-outputs",
                                     "{d}/o_bad"], expect="same",
             same_as=[*run8, "--image", "{d}/digit_L.png", "--save-outputs", "{d}/o_good"]),
        Case("palette PNG (P)", [*run8, "--image", "{d}/digit_P.png", "--save-outputs",
                                 "{d}/o_bad"], expect="same",
             same_as=[*run8, "--image", "{d}/digit_L.png", "--save-outputs", "{d}/o_good"]),
        Case("16-bit PNG, RGB model", ["run", "{d}/rgb.onnx", "--image", "{d}/digit_I16.png",
                                       "--save-outputs", "{d}/o_bad"], expect="same",
             same_as=["run", "{d}/rgb.onnx", "--image", "{d}/digit_L.png", "--save-outputs",
                      "{d}/o_good"], fast=True),
        Case("float TIFF, RGB model", ["run", "{d}/rgb.onnx", "--image", "{d}/digit_F.tiff",
                                       "--save-outputs", "{d}/o_bad"], expect="same",
             same_as=["run", "{d}/rgb.onnx", "--image", "{d}/digit_L.png", "--save-outputs",
                      "{d}/o_good"]),
        Case("image not an image", [*run8, "--image", "{d}/not_an_image.png"],
             names="not_an_image.png"),
        Case("image is a directory", [*run8, "--image", "{d}/a_dir"], names="a_dir"),
        Case("-s 0 run", [*run8, "--image", "{d}/digit_L.png", "-s", "0"], names="-s",
             fast=True),
        Case("-s 0 quantize", ["quantize", m, "-i", "{d}/imgs_zero", "-o", "{d}/t.json", "-s",
                               "0", "--no-progress"], names="-s"),
        # options
        Case("compare --plot .txt", [*cmp, "--input", "{d}/x1.npy", "--plot", "{d}/plot.txt"],
             names="plot.txt", fast=True),
        Case("npz with an array no input takes", ["run", m, "--input", "{d}/extra_array.npz"]),
        Case("float64 past float32's range", ["run", m, "--input", "{d}/past_float32.npy"]),
        Case("--debug-data onto a file", ["run", m, "--input", "{d}/x1.npy", "--debug-data",
                                          "{d}/a_file.txt"], names="a_file.txt"),
        Case("run --top-k 0", [*run8, "--input", "{d}/x1.npy", "--top-k", "0"]),
        Case("run --repeat 0", [*run8, "--input", "{d}/x1.npy", "--repeat", "0"]),
        Case("run --warmup -1", [*run8, "--input", "{d}/x1.npy", "--warmup", "-1"]),
        Case("run int8 without --calib", ["run", m, "--precision", "int8", "--input",
                                          "{d}/x1.npy"]),
        Case("run -g 3 channels", [*run8, "--image", "{d}/digit_L.png", "-g", "3,8,8"]),
        Case("run --input-shape bad", [*run8, "--input", "{d}/x1.npy", "--input-shape",
                                       "input=a,b"]),
        Case("run empty labels", [*run8, "--input", "{d}/x1.npy", "--labels",
                                  "{d}/empty_labels.txt"], names="empty_labels.txt"),
        Case("quantize --percentile 150", ["quantize", m, "-i", "{d}/x.npy", "-o", "{d}/t.json",
                                           "-a", "percentile", "--percentile", "150",
                                           "--no-progress"]),
        Case("quantize inputs missing", ["quantize", m, "-i", "{d}/none.npy", "-o", "{d}/t.json",
                                         "--no-progress"], names="none.npy"),
        # models
        Case("onnx corrupt", ["run", "{d}/corrupt.onnx", "--input", "{d}/x1.npy"],
             names="corrupt.onnx", fast=True),
        Case("onnx empty", ["compile", "{d}/empty.onnx", "--calib", "{d}/calib.json", "-o",
                            "{d}/out"], names="empty.onnx"),
        Case("onnx text", ["compare", "{d}/text.onnx", "--calib", "{d}/calib.json", "--input",
                           "{d}/x1.npy", "--no-progress"], names="text.onnx"),
        Case("model is a directory", ["run", "{d}/a_dir", "--input", "{d}/x1.npy"],
             names="a_dir"),
        Case("model missing", ["run", "{d}/none.onnx", "--input", "{d}/x1.npy"],
             names="none.onnx"),
        # loadables
        Case("loadable truncated", ["run", "{d}/truncated.nvdla", "--input", "{d}/x1.npy"],
             names="truncated.nvdla"),
        Case("loadable tiny", ["run", "{d}/short.nvdla", "--input", "{d}/x1.npy"],
             names="short.nvdla"),
        Case("loadable wrong shape", ["run", "{d}/model.nvdla", "--input", "{d}/shape.npy"]),
        # traces
        *(Case(f"trace {t}", ["trace", "run", f"{{d}}/traces/nv_small/{t}"], names=t,
               fast=t == "garbage_line")
          for t in ("garbage_line", "unknown_command", "unknown_register", "no_check",
                    "bad_value", "two_cfgs")),
    ]
    return out


# ------------------------------------------------------------------ classify
def _same_outputs(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.glob("*.npy"))
    return bool(names) and names == sorted(p.name for p in b.glob("*.npy")) and all(
        np.array_equal(np.load(a / n), np.load(b / n)) for n in names)


def run_case(case: Case, d: Path, timeout: float) -> Outcome:
    import shutil
    import time

    args = [a.replace("{d}", str(d)) for a in case.args]
    for out in ("o_bad", "o_good"):
        shutil.rmtree(d / out, ignore_errors=True)
    t0 = time.perf_counter()
    try:
        proc = _opendla(args, timeout)
    except subprocess.TimeoutExpired:
        return Outcome(case, "hang", None, f"no answer in {timeout:.0f} s", timeout)
    seconds = time.perf_counter() - t0
    err = proc.stderr
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    last = errors[-1] if errors else (err.strip().splitlines() or [""])[-1]
    if "Traceback" in err:
        return Outcome(case, "traceback", proc.returncode, last, seconds)
    if case.expect == "same":
        if proc.returncode:
            return Outcome(case, "other", proc.returncode, last, seconds)
        good = _opendla([a.replace("{d}", str(d)) for a in case.same_as], timeout)
        if good.returncode:
            return Outcome(case, "other", proc.returncode, f"reference run failed: {good.stderr}",
                           seconds)
        same = _same_outputs(d / "o_bad", d / "o_good")
        return Outcome(case, "clean" if same else "silent", 0,
                       "" if same else "outputs differ from the 8-bit image's", seconds)
    if case.expect == WARN:
        warned = any(line.startswith("warning:") and "saturat" in line
                     for line in err.splitlines())
        verdict = "clean" if proc.returncode == 0 and warned else \
            "silent" if proc.returncode == 0 else "other"
        return Outcome(case, verdict, proc.returncode, last, seconds)
    if proc.returncode == 0:
        return Outcome(case, "silent", 0, "exit 0", seconds)
    if proc.returncode == 2 and len(errors) == 1 and case.names in errors[0]:
        return Outcome(case, "clean", 2, last, seconds)
    why = f"exit {proc.returncode}, {len(errors)} error line(s)"
    if errors and case.names not in errors[0]:
        why += f", does not name {case.names!r}"
    return Outcome(case, "other", proc.returncode, f"{why}: {last}", seconds)


def audit(fast: bool = False, timeout: float = 120.0,
          progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Build the fixtures and run every case (``fast``: the marked subset)."""
    with tempfile.TemporaryDirectory(prefix="opendla_audit_") as tmp:
        d = Path(tmp)
        make_fixtures(d, timeout, loadable=not fast)
        results = []
        for case in cases():
            if fast and not case.fast:
                continue
            res = run_case(case, d, timeout)
            results.append(res)
            if progress:
                progress(res)
        return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast", action="store_true", help="only the subset the tests run")
    ap.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    args = ap.parse_args(argv)

    def show(res: Outcome) -> None:
        if not args.json:
            print(f"{res.verdict:<9} {res.case.name:<32} {res.detail[:110]}", flush=True)

    results = audit(args.fast, args.timeout, show)
    counts = Counter(r.verdict for r in results)
    if args.json:
        print(json.dumps({"cases": [{"name": r.case.name, "verdict": r.verdict,
                                     "status": r.status, "detail": r.detail}
                                    for r in results], "counts": counts}, indent=1))
    else:
        print(f"{len(results)} cases: " + ", ".join(f"{counts[v]} {v}" for v in
                                                    ("clean", "traceback", "hang", "silent",
                                                     "other")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
