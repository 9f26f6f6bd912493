"""``opendla eval MODEL --data DATA --calib C``: top-1/top-5 of fp32 and the int8 DLA path.

DATA is an ``.npz`` with arrays ``x`` (inputs, one sample per row) and ``y``
(integer labels), or an image folder with one sub-folder per class (class
``i`` is the ``i``-th sub-folder in sorted order, as ImageNet's val layout
sorted by WordNet id), preprocessed with the options of ``opendla quantize``.

The int8 path is ``--device nvdla`` (the simulated NVDLA with CPU fallback,
the default) or ``--device cpu`` (the int8 CPU reference: the same numbers
without the register-level model); nodes the table was checked with in fp32
(``quantize --keep-float``), or those ``--keep-float`` names, run in fp32 on the
CPU.  The samples are cut into chunks that
run on Dask: by default a local cluster with one single-threaded worker
process per core
(``--workers N`` to choose, ``--workers 0`` for this process alone), or an
existing cluster with ``--scheduler tcp://HOST:PORT``.  Each worker prepares
(compiles) the model once; results are identical for any number of workers.

Running on a cluster of machines::

    dask scheduler                              # on the head node: tcp://HEAD:8786
    dask worker tcp://HEAD:8786 --nthreads 1    # on each machine, once per core
    opendla eval mobilenet_v2.onnx --calib calib.json --data imagenet/val \\
        -w 123.7,116.3,103.5 -s 0.0171,0.0175,0.0174 -c 1 --scheduler tcp://HEAD:8786

Workers need opendla installed, not the data: this process reads and
preprocesses the samples and ships them to the workers chunk by chunk.  A
worker that dies mid-run costs time, not results: its chunks run again on
the others (Dask reschedules them; eval resubmits any the scheduler gives up
on).  A ``--scheduler`` that is not a Dask scheduler fails within about 25 s.

The data must fit the model: the model's output must be one score per class
(``[1, classes]``; a detector's outputs are refused), the data must hold
samples, and an image folder must have one sub-folder per class of the
model (folder ``i`` is labelled class ``i``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from accel.config import DEFAULT_PRESET, PRESETS
from opendla.commands._inputs import (
    add_image_options,
    add_keep_float_option,
    image_dims,
    image_options,
    keep_float_nodes,
    load_image_batch,
    warn_int8_inputs,
)
from opendla.errors import UsageError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("eval", help="dataset accuracy of fp32 and int8 DLA (on Dask)",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="ONNX classifier")
    p.add_argument("--data", required=True, metavar="DIR_OR_NPZ",
                   help="image folder (one sub-folder per class) or .npz with x and y")
    p.add_argument("--calib", required=True, help="calibration table from 'opendla quantize'")
    p.add_argument("--device", default="nvdla", choices=("nvdla", "cpu"),
                   help="the int8 path: the simulated NVDLA with CPU fallback, or the int8 "
                        "CPU reference (default nvdla)")
    p.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"hardware configuration (default {DEFAULT_PRESET})")
    add_image_options(p)
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="fix the shape of an input with dynamic dimensions")
    p.add_argument("--output", metavar="NAME", help="the classifier output (default: the first)")
    add_keep_float_option(p)
    p.add_argument("--limit", type=int, metavar="N", help="evaluate the first N samples only")
    p.add_argument("--workers", type=int, metavar="N",
                   help="local Dask worker processes (default: one per core; 0: no Dask, "
                        "run in this process)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run on this existing Dask cluster instead of a local one")
    p.add_argument("--chunk-size", type=int, default=16, metavar="N",
                   help="samples per Dask task (default 16)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


# ------------------------------------------------------------------ data
class NpzData:
    """Samples ``x[i]`` with labels ``y[i]`` from an ``.npz``."""

    def __init__(self, path: Path, input_shape: tuple[int, ...]) -> None:
        from opendla.commands._inputs import read_arrays

        arrays = read_arrays(path)
        missing = [k for k in ("x", "y") if k not in arrays]
        if missing:
            raise UsageError(f"--data {str(path)!r} has arrays {', '.join(sorted(arrays))}; "
                             f"it needs x (inputs) and y (integer labels)")
        x, y = arrays["x"], arrays["y"]
        per_sample = tuple(input_shape[1:])
        if x.shape[1:] == tuple(input_shape) and input_shape[0] == 1:
            x = x[:, 0]
        if x.ndim == 0 or x.shape[1:] != per_sample:
            raise UsageError(f"--data x has shape {x.shape}; the model input needs "
                             f"[N, {', '.join(map(str, per_sample))}]")
        if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
            raise UsageError(f"--data y must be {len(x)} integer labels, got {y.dtype} "
                             f"{y.shape}")
        if not np.issubdtype(x.dtype, np.floating):
            raise UsageError(f"--data x has dtype {x.dtype}; the model takes float inputs")
        self.x, self.y = x.astype(np.float32, copy=False), y.astype(np.int64)
        self.classes: list[str] | None = None

    def __len__(self) -> int:
        return len(self.y)

    def chunk(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[start:stop], self.y[start:stop]


class ImageFolderData:
    """``DIR/<class>/<image>``: class ``i`` is the ``i``-th sub-folder by name."""

    def __init__(self, path: Path, options: dict) -> None:
        from tengine_host.quant.dataset import IMAGE_SUFFIXES

        self.options = options
        self.classes = sorted(d.name for d in path.iterdir() if d.is_dir())
        if not self.classes:
            raise UsageError(f"--data {str(path)!r} has no class sub-folders; lay images out "
                             f"as DIR/<class>/<image> or give an .npz with x and y")
        self.files: list[tuple[Path, int]] = []
        for label, name in enumerate(self.classes):
            self.files += [(f, label) for f in sorted((path / name).iterdir())
                           if f.suffix.lower() in IMAGE_SUFFIXES]
        if not self.files:
            raise UsageError(f"no images ({', '.join(IMAGE_SUFFIXES)}) under the class "
                             f"folders of {str(path)!r}")

    def __len__(self) -> int:
        return len(self.files)

    def chunk(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        part = self.files[start:stop]
        x = load_image_batch([f for f, _ in part], self.options)
        return x, np.array([label for _, label in part], dtype=np.int64)


def class_count(output: str, shape: tuple[int, ...]) -> int:
    """The number of classes of a classifier output of ``shape`` (``[1, classes]``,
    unit dimensions allowed, as ``[1, classes, 1, 1]``); anything else is refused,
    since top-k accuracy needs one score per class."""
    dims = [int(d) for d in shape[1:] if d != 1]
    if len(dims) != 1 or dims[0] < 2:
        raise UsageError(f"output {output!r} has shape {tuple(shape)}: eval scores classifiers, "
                         f"whose output is one score per class ([1, classes]); this output is "
                         f"not class scores (a detector's boxes or a feature map?); --output "
                         f"names another output")
    return dims[0]


def check_data(data, classes: int, where: str) -> None:
    """Refuse data that cannot measure this classifier: no samples, or an image folder
    whose class sub-folders are not the model's classes one to one (class ``i`` is the
    ``i``-th folder, so another count labels the images wrongly)."""
    if len(data) == 0:
        raise UsageError(f"--data {where!r} holds no samples")
    folders = getattr(data, "classes", None)
    if folders is not None and len(folders) != classes:
        raise UsageError(f"--data {where!r} has {len(folders)} class sub-folders but the model "
                         f"scores {classes} classes; folder i is labelled class i, so they "
                         f"must match one to one (for a subset of the classes give an .npz "
                         f"with x and the true labels y)")


def load_data(args: argparse.Namespace, input_shape: tuple[int, ...]):
    path = Path(args.data)
    if path.is_dir():
        return ImageFolderData(path, image_options(args, image_dims(args, input_shape)))
    if path.is_file():
        return NpzData(path, input_shape)
    raise UsageError(f"--data {args.data!r} does not exist (an image folder or an .npz)")


# ------------------------------------------------------------------ running
#: seconds to reach a scheduler and complete Dask's handshake before giving up
CONNECT_TIMEOUT = 20.0
#: times a chunk whose worker died is submitted again before eval gives up
MAX_RESUBMITS = 3


def parse_scheduler(address: str) -> tuple[str, int]:
    """``(host, port)`` of a Dask scheduler address ``tcp://HOST:PORT``; a
    :class:`UsageError` names the bad value and the form allowed."""
    from urllib.parse import urlsplit

    form = "the form tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786"
    try:
        url = urlsplit(address)
        port = url.port
    except ValueError as exc:
        raise UsageError(f"--scheduler {address!r}: {exc}; give {form}") from None
    if url.scheme != "tcp":
        what = f"scheme {url.scheme!r}" if url.scheme else "no scheme"
        raise UsageError(f"--scheduler {address!r} has {what}; give {form}")
    if not url.hostname or port is None or url.path not in ("", "/") or url.query:
        raise UsageError(f"--scheduler {address!r} is not {form}")
    if port == 0:
        raise UsageError(f"--scheduler {address!r}: port 0 is not a listening port; give {form}")
    return url.hostname, port


def connect_scheduler(address: str, timeout: float = CONNECT_TIMEOUT):
    """A Dask client of the scheduler at ``address``, or a :class:`UsageError` within
    about ``timeout`` seconds.

    A plain TCP connection comes first, so that a host where nothing listens is
    reported at once.  Dask's own handshake then runs in a helper thread that is
    abandoned after ``timeout``: a listener that is not a Dask scheduler may accept
    the connection and never answer, and ``Client(timeout=...)`` alone does not
    bound every such wait.
    """
    import socket
    import threading

    from distributed import Client

    host, port = parse_scheduler(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise UsageError(f"--scheduler {address!r}: cannot connect: {exc}") from None
    outcome: dict = {}

    def handshake() -> None:
        try:
            client = Client(address, timeout=f"{timeout}s")
        except BaseException as exc:   # noqa: BLE001 - reported to the waiting thread
            outcome["error"] = exc
            return
        if outcome.setdefault("client", client) is not client:   # too late: nobody waits
            client.close()

    thread = threading.Thread(target=handshake, name="dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 5)
    client = outcome.setdefault("client", None)     # from now on a late client closes itself
    if client is not None:
        return client
    error = outcome.get("error")
    why = f"{type(error).__name__}: {error}" if error is not None else \
        f"no Dask handshake within {timeout + 5:.0f} s"
    raise UsageError(f"--scheduler {address!r}: cannot connect to a Dask scheduler there "
                     f"({why}); is 'dask scheduler' listening on that port?")


def _validate(args: argparse.Namespace) -> None:
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit} must be at least 1")
    if args.chunk_size < 1:
        raise UsageError(f"--chunk-size {args.chunk_size} must be at least 1")
    if args.workers is not None and args.workers < 0:
        raise UsageError(f"--workers {args.workers} must be 0 (no Dask) or more")
    if args.scheduler:
        parse_scheduler(args.scheduler)
    if args.scheduler and args.workers is not None:
        raise UsageError("--workers sizes a local cluster; with --scheduler the cluster has "
                         "its own workers")
    if not Path(args.model).is_file():
        raise UsageError(f"model {args.model!r} does not exist")


def _shapes_from_data(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """Batch-1 input shapes the data fixes, for models with dynamic dimensions: ``-g``
    for an image folder, ``x``'s rows for an ``.npz`` (nothing when neither tells)."""
    from opendla.commands._inputs import read_arrays
    from opendla.commands.run import onnx_input_names

    names = onnx_input_names(args.model)
    path = Path(args.data)
    if len(names) != 1:
        return {}
    if path.is_dir() and args.dims is not None:
        return {names[0]: (1, *args.dims)}
    if path.is_file():
        x = read_arrays(path).get("x")
        if x is not None and x.ndim >= 2:
            return {names[0]: (1, *x.shape[1:])}
    return {}


def _prepare(args: argparse.Namespace):
    """The spec workers prepare, the data and the classifier's class count."""
    from opendla.commands.run import parse_shapes
    from tengine_host.errors import TengineInputError
    from tengine_host.evaluate import EvalSpec
    from tengine_host.model import load_model
    from tengine_host.quant import load_table
    from tengine_host.quant.table import check_table

    shapes = parse_shapes(args.input_shape) or _shapes_from_data(args)
    try:
        graph = load_model(args.model, input_shapes=shapes)
        table = load_table(args.calib)
        check_table(table, graph, f"calibration table {args.calib!r}")
    except TengineInputError as exc:
        hint = (" (for an image folder -g C,H,W fixes them)"
                if "dynamic" in str(exc) and Path(args.data).is_dir() else "")
        raise UsageError(f"{exc}{hint}") from None
    if len(graph.inputs) != 1:
        raise UsageError(f"eval feeds one-input classifiers; this model has inputs "
                         f"{', '.join(graph.inputs)}")
    output = args.output or graph.outputs[0]
    if output not in graph.outputs:
        raise UsageError(f"--output {output!r} not in the model outputs "
                         f"({', '.join(graph.outputs)})")
    in_shape = graph.tensors[graph.inputs[0]].shape
    if in_shape[0] != 1:     # evaluated sample by sample
        shapes = {**shapes, graph.inputs[0]: (1, *in_shape[1:])}
        graph = load_model(args.model, input_shapes=shapes)
        in_shape = graph.tensors[graph.inputs[0]].shape
    classes = class_count(output, graph.tensors[output].shape)
    data = load_data(args, in_shape)
    check_data(data, classes, args.data)
    spec = EvalSpec(Path(args.model).read_bytes(), table.to_json(), args.device, args.preset,
                    tuple((n, tuple(s)) for n, s in shapes.items()), output,
                    tuple(sorted(keep_float_nodes(args, graph, table))))
    return spec, data, classes


def _chunks(data, args: argparse.Namespace, classes: int, device: str, table=None):
    """``(start, x, y)`` per chunk, checked as they are read (NaN/Inf refused; values
    ``table`` saturates warned about once)."""
    from opendla.commands.run import onnx_input_names
    from tengine_host.evaluate import chunks

    name = onnx_input_names(args.model)[0]
    warned = False

    n = len(data) if args.limit is None else min(args.limit, len(data))
    for start, stop in chunks(n, args.chunk_size):
        x, y = data.chunk(start, stop)
        if y.min(initial=0) < 0 or y.max(initial=0) >= classes:
            bad = int(y[(y < 0) | (y >= classes)][0])
            raise UsageError(f"--data label {bad} (sample {start}+) is outside the model's "
                             f"{classes} classes")
        if warned:
            warn_int8_inputs({name: x}, None, f"--device {device}")
        else:
            warned = warn_int8_inputs({name: x}, table, f"--device {device}")
        yield start, x, y


def _total(data, args: argparse.Namespace) -> int:
    """Samples to evaluate (``--limit`` of the data)."""
    return len(data) if args.limit is None else min(args.limit, len(data))


def _local_client(args: argparse.Namespace):
    """A Dask client on a new local cluster of ``--workers`` processes."""
    import logging

    from distributed import Client, LocalCluster

    workers = args.workers or os.cpu_count() or 1
    # one single-threaded process per worker, and BLAS kept to one thread inside each
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR,
                           env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                "MKL_NUM_THREADS": "1"})
    return Client(cluster)


def _run_dask(client, spec, items, acc, bar, window: int) -> None:
    """Submit chunks with at most ``window`` in flight; tally them as they complete.

    A chunk whose worker died (the process killed, the machine gone) is submitted
    again, up to :data:`MAX_RESUBMITS` times: chunks are pure, so the numbers are
    the same as without the fault.  Dask itself reschedules the tasks of a lost
    worker; this covers the cases where it gives up: ``KilledWorker``, a lost
    connection, or a task cancelled because the scattered model went with the
    worker (then the model is scattered again).
    """
    from concurrent.futures import CancelledError

    from distributed import KilledWorker, as_completed
    from distributed.comm import CommClosedError

    from tengine_host.errors import TengineInputError
    from tengine_host.evaluate import evaluate_chunk

    model = {"future": client.scatter([spec], broadcast=True)[0]}   # travels once
    in_flight: dict[int, tuple[np.ndarray, np.ndarray]] = {}        # start -> (x, y)
    start_of: dict[str, int] = {}                                    # task key -> start
    resubmits: dict[int, int] = {}
    pending = as_completed()
    items = iter(items)

    def submit(start: int, x: np.ndarray) -> None:
        future = client.submit(evaluate_chunk, model["future"], start, x, pure=False,
                               retries=1)
        start_of[future.key] = start
        pending.add(future)

    def submit_next() -> None:
        item = next(items, None)
        if item is not None:
            start, x, y = item
            in_flight[start] = (x, y)
            submit(start, x)

    for _ in range(window):
        submit_next()
    for future in pending:
        start = start_of.pop(future.key)
        try:
            _, top_fp, top_q = future.result()
        except TengineInputError as exc:    # the model or a sample the worker could not run
            raise UsageError(f"a Dask worker failed: {exc}") from None
        except (KilledWorker, CancelledError, CommClosedError, OSError) as exc:
            resubmits[start] = resubmits.get(start, 0) + 1
            if resubmits[start] > MAX_RESUBMITS:
                raise UsageError(f"the chunk of samples {start}+ was lost "
                                 f"{MAX_RESUBMITS + 1} times ({type(exc).__name__}: {exc}); "
                                 f"are the workers running out of memory?") from None
            if model["future"].status != "finished":    # every copy of the model is gone
                model["future"] = client.scatter([spec], broadcast=True)[0]
            submit(start, in_flight[start][0])
            continue
        _, y = in_flight.pop(start)
        acc.add(start, y, top_fp, top_q)
        bar.update(len(y))
        submit_next()


def evaluate(args: argparse.Namespace) -> tuple[dict, int]:
    """Run the evaluation; returns the result document and the number of workers
    (0: in this process).  A ``--scheduler`` is reached first, so that a wrong
    address fails before the model is prepared."""
    remote = connect_scheduler(args.scheduler) if args.scheduler else None
    try:
        return _evaluate(args, remote)
    finally:
        if remote is not None:
            remote.close()


def _evaluate(args: argparse.Namespace, remote) -> tuple[dict, int]:
    from tengine_host.evaluate import Accuracy, evaluate_chunk
    from tengine_host.quant.progress import progress_bar

    spec, data, classes = _prepare(args)
    acc = Accuracy(spec.int8_label)
    started = time.perf_counter()
    items = _chunks(data, args, classes, args.device, spec.table)
    with progress_bar(_total(data, args), "eval", enabled=not args.no_progress) as bar:
        if args.workers == 0 and remote is None:
            for start, x, y in items:
                _, top_fp, top_q = evaluate_chunk(spec, start, x)
                acc.add(start, y, top_fp, top_q)
                bar.update(len(y))
            return acc.as_dict(time.perf_counter() - started), 0
        client = remote or _local_client(args)
        try:
            workers = len(client.nthreads())
            if workers == 0:
                raise UsageError(f"the Dask cluster at {args.scheduler} has no workers")
            _run_dask(client, spec, items, acc, bar, window=2 * sum(client.nthreads().values()))
        finally:
            if remote is None:
                cluster = client.cluster
                client.close()
                cluster.close()
    return acc.as_dict(time.perf_counter() - started), workers


def run(args: argparse.Namespace) -> int:
    _validate(args)
    doc, workers = evaluate(args)
    count = f"{workers} worker{'s' if workers != 1 else ''}"
    where = (f"Dask cluster {args.scheduler} ({count})" if args.scheduler else
             f"local Dask cluster ({count})" if workers else "this process")
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    int8 = next(k for k in doc["top1"] if k != "fp32")
    print(f"{args.model}: {doc['samples']} samples on {where}, int8 path {int8}"
          f"{' (' + args.preset + ')' if int8 == 'nvdla' else ''}")
    print(f"  {'':<10} {'top-1':>8} {'top-5':>8}")
    for key in ("fp32", int8):
        print(f"  {key:<10} {doc['top1'][key]:>8.2%} {doc['top5'][key]:>8.2%}")
    print(f"  top-1 agreement {int8} vs fp32: {doc['agreement']:.2%}")
    print(f"  {doc['seconds']:.2f} s ({doc['seconds'] / max(doc['samples'], 1) * 1e3:.1f} ms "
          f"per sample)")
    sys.stdout.flush()
    return 0
