"""``inspect`` and ``run`` on loadables: enum names, and mutated files give clean errors.

Seeded mutations of a compiled loadable and of NVIDIA's (flipped bytes,
truncations, random 4-byte words) must end in exit 0 or exit 2 with one
``error:`` line: never a traceback, whatever the reader or the runtime meets.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from opendla.cli import main
from tengine_host.model import load_model
from tengine_host.quant import calibrate, save_table
from tests.conftest import shared_path

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")


@pytest.fixture(scope="module")
def loadable(tmp_path_factory) -> Path:
    x = (load_digits().images[:16] / 16.0).astype(np.float32)[:, None]
    root = tmp_path_factory.mktemp("fuzz")
    table = calibrate(load_model(LENET), [{"input": s[None]} for s in x], progress=False)
    save_table(table, root / "calib.json")
    assert main(["compile", LENET, "--calib", str(root / "calib.json"), "-o", str(root)]) == 0
    (path,) = root.glob("*.nvdla")
    return path


def test_inspect_prints_enum_names(loadable, capsys):
    capsys.readouterr()
    assert main(["inspect", str(loadable), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    tensors = {t["name"]: t for t in doc["tensors"]}
    assert tensors["input"]["data_type"] == "INT8"
    assert tensors["input"]["pixel_format"] == "FEATURE_X8"
    assert tensors["input"]["data_format"] == "NCHW"
    assert tensors["input"]["data_category"] == "FEATURE"
    assert {m["domain"] for m in doc["memories"]} == {"SYSTEM"}
    assert [t["interface"] for t in doc["tasks"]] == ["DLA1"]
    assert {"NETWORK_DESC", "DEP_GRAPH", "OP_LIST", "SURF_LIST"} <= \
        {b["sub_interface"] for b in doc["blobs"]}
    assert main(["inspect", str(loadable)]) == 0
    text = capsys.readouterr().out
    assert "INT8 NCHW FEATURE_X8" in text and "task 0: DLA1" in text


def _mutations(data: bytes, count: int, seed: int):
    rng = np.random.default_rng(seed)
    for k in range(count):
        buf = bytearray(data)
        kind = k % 3
        if kind == 0:                                  # one flipped byte
            i = int(rng.integers(len(buf)))
            buf[i] ^= 1 << int(rng.integers(8))
        elif kind == 1:                                # truncated
            buf = buf[:int(rng.integers(len(buf)))]
        else:                                          # a random 32-bit word
            i = int(rng.integers(max(1, len(buf) - 4)))
            buf[i:i + 4] = rng.integers(0, 256, 4, dtype=np.uint8).tobytes()
        yield k, bytes(buf)


def _clean(rc: int, err: str, case: str) -> None:
    assert "Traceback" not in err, case
    assert rc == 0 or (rc == 2 and err.startswith("error: ") and err.count("\n") == 1), \
        f"{case}: exit {rc}, stderr {err!r}"


@pytest.mark.parametrize("source", ["ours", "nvidia"])
def test_inspect_on_mutated_loadables_is_clean(source, loadable, tmp_path, capsys):
    data = (loadable if source == "ours" else shared_path(
        "nvdla", "loadables", "flatbufs", "kmd", "CONV", "CONV_D_L0_0_small_fbuf")).read_bytes()
    path = tmp_path / "m.nvdla"
    errors = 0
    for k, buf in _mutations(data, 210, seed=7):
        path.write_bytes(buf)
        rc = main(["inspect", str(path), "--json"])
        cap = capsys.readouterr()
        _clean(rc, cap.err, f"{source} mutation {k}")
        errors += rc == 2
    assert errors > 0          # the mutations do reach the error paths


def test_run_on_mutated_loadables_is_clean(loadable, tmp_path, capsys):
    np.save(tmp_path / "q.npy", np.zeros((1, 1, 8, 8), np.int8))
    path = tmp_path / "m.nvdla"
    for k, buf in _mutations(loadable.read_bytes(), 60, seed=11):
        path.write_bytes(buf)
        rc = main(["run", str(path), "--input", str(tmp_path / "q.npy")])
        cap = capsys.readouterr()
        _clean(rc, cap.err, f"run mutation {k}")
