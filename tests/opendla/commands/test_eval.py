"""``opendla eval``: accuracy of fp32 and the int8 DLA path, in-process and on Dask.

The Dask test starts a real ``dask scheduler`` and two ``dask worker``
processes on localhost, as a user's cluster would run; the results must be
identical to the in-process run and to a local cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from opendla.cli import main
from tengine_host.model import load_model
from tengine_host.quant import calibrate, save_table

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")
COUNT = 90


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    root = tmp_path_factory.mktemp("eval")
    table = calibrate(load_model(LENET), [{"input": s[None]} for s in x[:64]], progress=False)
    save_table(table, root / "calib.json")
    np.savez(root / "digits.npz", x=x[-COUNT:], y=d.target[-COUNT:])
    return root, x[-COUNT:], d.target[-COUNT:]


def _ort_top(x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(LENET, providers=["CPUExecutionProvider"])
    return np.array([int(np.argmax(sess.run(None, {"input": s[None]})[0])) for s in x])


def _eval(capsys, *extra: str) -> dict:
    assert main(["eval", LENET, *extra, "--json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"samples", "top1", "top5", "agreement", "seconds"}
    return doc


def _same(a: dict, b: dict) -> None:
    assert {k: v for k, v in a.items() if k != "seconds"} == \
        {k: v for k, v in b.items() if k != "seconds"}


def test_in_process_matches_onnxruntime_and_the_int8_reference(data, capsys):
    root, x, y = data
    common = ["--data", str(root / "digits.npz"), "--calib", str(root / "calib.json"),
              "--workers", "0"]
    doc = _eval(capsys, *common)
    assert doc["samples"] == COUNT
    # fp32 top-1 as onnxruntime computes it on the same samples
    assert doc["top1"]["fp32"] == pytest.approx(float(np.mean(_ort_top(x) == y)))
    # the DLA path equals the int8 CPU reference (plain numpy), so their accuracy does too
    ref = _eval(capsys, *common, "--device", "cpu")
    assert doc["top1"]["nvdla"] == ref["top1"]["int8_cpu"]
    assert doc["top5"]["nvdla"] == ref["top5"]["int8_cpu"]
    assert doc["agreement"] == ref["agreement"] > 0.9
    limited = _eval(capsys, *common, "--limit", "10", "--chunk-size", "3")
    assert limited["samples"] == 10


def test_keep_float_of_every_dla_layer_gives_fp32s_answers(data, capsys):
    """With every weighted layer kept in fp32 (pooling and flatten still int8 on the DLA:
    exact on the quantized values), the int8 path differs from fp32 only by the rounding
    of two activations: top-1 agrees on (nearly) every digit, and an unknown name is an
    error naming it."""
    root, _, _ = data
    common = ["--data", str(root / "digits.npz"), "--calib", str(root / "calib.json"),
              "--workers", "0"]
    layers = ",".join(f"/0/{p}" for p in ("features/features.0/Conv",
                                           "features/features.3/Conv",
                                           "classifier/classifier.1/Gemm",
                                           "classifier/classifier.3/Gemm",
                                           "classifier/classifier.5/Gemm"))
    everything = _eval(capsys, *common, "--keep-float", layers)
    plain = _eval(capsys, *common)
    assert everything["agreement"] >= max(plain["agreement"], 0.97)
    assert main(["eval", LENET, *common, "--keep-float", "conv9", "--no-progress"]) == 2
    assert "--keep-float 'conv9' is neither a node nor a tensor" in capsys.readouterr().err


def test_image_folder_layout(data, tmp_path, capsys):
    """DIR/<class>/<image>: labels from sorted folder names; the fp32 top-1 of the
    preprocessed PNGs (pixel * 1/16) equals onnxruntime's on the original digits."""
    from PIL import Image

    root, x, y = data
    for i, (img, label) in enumerate(zip(x[:30, 0], y[:30], strict=True)):
        folder = tmp_path / f"class_{label}"
        folder.mkdir(exist_ok=True)
        Image.fromarray(np.round(img * 16).astype(np.uint8), "L").save(folder / f"{i}.png")
    # every digit 0..9 occurs in 30 samples, so folder i is class i
    assert len(list(tmp_path.iterdir())) == 10
    doc = _eval(capsys, "--data", str(tmp_path), "--calib", str(root / "calib.json"),
                "--workers", "0", "-s", "0.0625")
    assert doc["samples"] == 30
    assert doc["top1"]["fp32"] == pytest.approx(float(np.mean(_ort_top(x[:30]) == y[:30])))


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A real ``dask scheduler`` and two ``dask worker`` processes on localhost."""
    from distributed import Client

    root = tmp_path_factory.mktemp("dask")
    dask = str(Path(sys.executable).with_name("dask"))
    sched_file = root / "scheduler.json"
    log = (root / "dask.log").open("w")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=log, stderr=subprocess.STDOUT, env=env)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        for _ in range(2):
            procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1",
                                           "--no-dashboard", "--host", "127.0.0.1"],
                                          stdout=log, stderr=subprocess.STDOUT, env=env))
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=90)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()


def test_two_external_workers_and_a_local_cluster_agree_with_one_process(data, dask_cluster,
                                                                         capsys):
    root, _, _ = data
    common = ["--data", str(root / "digits.npz"), "--calib", str(root / "calib.json"),
              "--chunk-size", "8"]
    alone = _eval(capsys, *common, "--workers", "0")
    on_cluster = _eval(capsys, *common, "--scheduler", dask_cluster)
    _same(alone, on_cluster)
    local = _eval(capsys, *common, "--workers", "2")
    _same(alone, local)
    assert main(["eval", LENET, *common, "--scheduler", dask_cluster, "--no-progress"]) == 0
    assert "2 workers" in capsys.readouterr().out
    # 12 chunks twice over two workers: each prepared (compiled) the model at most once
    from distributed import Client

    from tengine_host.evaluate import prepared_models

    with Client(dask_cluster, timeout="30s") as client:
        counts = client.run(prepared_models)
    assert len(counts) == 2 and set(counts.values()) <= {0, 1} and sum(counts.values()) >= 1


def test_eval_errors(data, tmp_path, capsys):
    root, x, _ = data
    calib = str(root / "calib.json")
    cases = [
        (["--data", str(tmp_path / "none.npz")], "does not exist"),
        (["--data", str(root / "digits.npz"), "--workers", "-1"], "--workers -1"),
        (["--data", str(root / "digits.npz"), "--scheduler", "tcp://127.0.0.1:9",
          "--workers", "2"], "--workers sizes a local cluster"),
    ]
    np.savez(tmp_path / "nolabels.npz", x=x)
    cases.append((["--data", str(tmp_path / "nolabels.npz")], "needs x (inputs) and y"))
    np.savez(tmp_path / "badlabel.npz", x=x[:2], y=np.array([3, 10]))
    cases.append((["--data", str(tmp_path / "badlabel.npz"), "--workers", "0"],
                  "label 10 (sample 0+) is outside the model's 10 classes"))
    nan = x[:2].copy()
    nan[1, 0, 0, 0] = np.nan
    np.savez(tmp_path / "nan.npz", x=nan, y=np.array([1, 2]))
    cases.append((["--data", str(tmp_path / "nan.npz"), "--workers", "0"], "NaN/Inf"))
    (tmp_path / "empty").mkdir()
    cases.append((["--data", str(tmp_path / "empty")], "no class sub-folders"))
    for extra, message in cases:
        assert main(["eval", LENET, "--calib", calib, "--no-progress", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err, err


def _orientation_set(root: Path, count: int) -> Path:
    """Upright and upside-down text lines of skimage's book page (scripts/)."""
    import importlib.util

    import skimage.data
    from PIL import Image

    script = Path(__file__).resolve().parents[3] / "scripts" / "text_orientation_set.py"
    spec = importlib.util.spec_from_file_location("text_orientation_set", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    crops = module.text_crops(skimage.data.page())[:count]
    for label, flip in (("0", False), ("180", True)):
        (root / label).mkdir(parents=True)
        for i, crop in enumerate(crops):
            Image.fromarray(np.ascontiguousarray(crop[::-1, ::-1] if flip else crop)).save(
                root / label / f"{i:03d}.png")
    return root


def test_real_text_orientation_classifier(tmp_path, capsys):
    """PaddleOCR's trained direction classifier (dynamic input, -g fixes it) on real text
    lines: eval's fp32 top-1 equals onnxruntime's on the same preprocessing, and the
    DLA's int8 top-1 agrees with fp32 on nearly every line."""
    import onnxruntime as ort
    from PIL import Image

    from tests.conftest import shared_path

    model = shared_path("models", "ppocr_mobile_v2_cls_48x192.onnx")
    data = _orientation_set(tmp_path / "lines", 12)
    prep = ["-g", "3,48,192", "-w", "127.5", "-s", str(1 / 127.5)]
    calib = tmp_path / "cls.json"
    assert main(["quantize", str(model), "-i", str(data / "0"), "-o", str(calib),
                 "--input-shape", "x=1,3,48,192", *prep[2:], "-g", "3,48,192"]) == 0
    capsys.readouterr()
    assert main(["eval", str(model), "--data", str(data), "--calib", str(calib), *prep,
                 "--workers", "0", "--json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    correct = 0
    for label, folder in enumerate(("0", "180")):
        for f in sorted((data / folder).iterdir()):
            img = np.asarray(Image.open(f).convert("RGB").resize((192, 48), Image.BILINEAR),
                             np.float32)
            x = ((img - 127.5) / 127.5).transpose(2, 0, 1)[None]
            correct += int(np.argmax(sess.run(None, {"x": x})[0]) == label)
    assert doc["samples"] == 24
    assert doc["top1"]["fp32"] == pytest.approx(correct / 24)
    assert doc["top1"]["fp32"] >= 0.8 and doc["agreement"] >= 0.9


@pytest.mark.parametrize("address, message", [
    ("127.0.0.1:8786", "has no scheme"),
    ("http://127.0.0.1:8786", "has scheme 'http'"),
    ("tcp://127.0.0.1", "is not the form tcp://HOST:PORT"),
    ("tcp://:8786", "is not the form tcp://HOST:PORT"),
    ("tcp://127.0.0.1:99999", "Port out of range"),
    ("tcp://127.0.0.1:port", "Port could not be cast"),
    ("tcp://127.0.0.1:0", "port 0 is not a listening port"),
    ("tcp://127.0.0.1:8786/x", "is not the form tcp://HOST:PORT"),
])
def test_scheduler_address_is_validated(data, capsys, address, message):
    root, _, _ = data
    assert main(["eval", LENET, "--data", str(root / "digits.npz"), "--calib",
                 str(root / "calib.json"), "--scheduler", address, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--scheduler {address!r}" in err and message in err, err


def test_a_listener_that_is_not_dask_fails_within_the_timeout(data, capsys):
    """A plain socket server accepts the connection and never answers: eval must give up
    with a clear error, not hang on Dask's handshake."""
    import socket
    import threading

    from opendla.commands.eval import connect_scheduler
    from opendla.errors import UsageError

    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])    # kept open, never written to
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        started = time.monotonic()
        with pytest.raises(UsageError, match="cannot connect to a Dask scheduler there"):
            connect_scheduler(address, timeout=3.0)
        assert time.monotonic() - started < 3.0 + 10
        assert accepted, "the test server saw no connection"
        started = time.monotonic()
        root, _, _ = data
        assert main(["eval", LENET, "--data", str(root / "digits.npz"), "--calib",
                     str(root / "calib.json"), "--scheduler", address,
                     "--no-progress"]) == 2
        assert time.monotonic() - started < 30     # before the model is prepared
        assert "is 'dask scheduler' listening on that port?" in capsys.readouterr().err
    finally:
        server.close()
        for conn in accepted:
            conn.close()


def test_data_that_cannot_measure_the_classifier_is_refused(data, tmp_path, capsys):
    """Empty data; 2 class folders for LeNet's 10 classes; a model whose output is a
    feature map (not one score per class)."""
    import onnx
    from onnx import TensorProto, helper
    from PIL import Image

    root, x, _ = data
    calib = str(root / "calib.json")
    np.savez(tmp_path / "empty.npz", x=x[:0], y=np.zeros(0, np.int64))
    for label in ("cat", "dog"):
        (tmp_path / "two" / label).mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8), np.uint8), "L").save(tmp_path / "two" / label / "a.png")
    cases = [(LENET, tmp_path / "empty.npz", calib, "holds no samples"),
             (LENET, tmp_path / "two", calib,
              "has 2 class sub-folders but the model scores 10 classes")]

    # a 1x1 conv whose output is a [1, 4, 8, 8] feature map: a detector-like head
    weights = helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 1, 1], [1.0, -1.0, 0.5, 2.0])
    graph = helper.make_graph([helper.make_node("Conv", ["input", "w"], ["boxes"])], "head",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                             [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("boxes", TensorProto.FLOAT,
                                                             [1, 4, 8, 8])], [weights])
    head = tmp_path / "head.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), head)
    table = calibrate(load_model(str(head)), [{"input": s[None]} for s in x[:8]],
                      progress=False)
    save_table(table, tmp_path / "head.json")
    cases.append((str(head), root / "digits.npz", str(tmp_path / "head.json"),
                  "output 'boxes' has shape (1, 4, 8, 8): eval scores classifiers"))
    for model, where, table_path, message in cases:
        assert main(["eval", model, "--data", str(where), "--calib", table_path,
                     "--workers", "0", "--no-progress"]) == 2, message
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


@pytest.mark.parametrize("allowed_failures", [3, 0], ids=["dask-reschedules", "eval-resubmits"])
def test_a_worker_killed_mid_run_changes_nothing(data, capsys, allowed_failures):
    """A local cluster of two worker processes; one is killed (SIGKILL) while it runs
    chunks.  Its chunks are run again elsewhere and the result equals the in-process
    run's: by Dask's scheduler (allowed-failures 3, its default), or by eval itself
    when the scheduler gives up on them at once (0: the chunk fails as KilledWorker)."""
    import signal
    import threading

    import dask
    from distributed import Client, LocalCluster

    root, _, _ = data
    common = ["--data", str(root / "digits.npz"), "--calib", str(root / "calib.json"),
              "--chunk-size", "3"]
    alone = _eval(capsys, *common, "--workers", "0")
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        pids = client.run(os.getpid)
        result: dict = {}

        def run_eval() -> None:
            result["code"] = main(["eval", LENET, *common, "--scheduler",
                                   cluster.scheduler_address, "--json", "--no-progress"])

        thread = threading.Thread(target=run_eval)
        thread.start()
        victim = None
        deadline = time.monotonic() + 120
        while victim is None and thread.is_alive() and time.monotonic() < deadline:
            busy = [w for w, keys in client.processing().items()
                    if any("evaluate_chunk" in str(k) for k in keys)]
            if busy:
                victim = busy[0]
                os.kill(pids[victim], signal.SIGKILL)
            else:
                time.sleep(0.05)
        thread.join(timeout=300)
        assert victim is not None, "no worker was seen running a chunk"
        assert not thread.is_alive(), "eval did not finish after the worker died"
        assert victim not in client.scheduler_info()["workers"]   # it really is gone
    assert result["code"] == 0
    doc = json.loads(capsys.readouterr().out)
    _same(alone, doc)
    assert doc["samples"] == COUNT
