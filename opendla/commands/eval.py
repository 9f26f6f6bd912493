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
preprocesses the samples and ships them to the workers chunk by chunk.
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


def load_data(args: argparse.Namespace, input_shape: tuple[int, ...]):
    path = Path(args.data)
    if path.is_dir():
        return ImageFolderData(path, image_options(args, image_dims(args, input_shape)))
    if path.is_file():
        return NpzData(path, input_shape)
    raise UsageError(f"--data {args.data!r} does not exist (an image folder or an .npz)")


# ------------------------------------------------------------------ running
def _validate(args: argparse.Namespace) -> None:
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit} must be at least 1")
    if args.chunk_size < 1:
        raise UsageError(f"--chunk-size {args.chunk_size} must be at least 1")
    if args.workers is not None and args.workers < 0:
        raise UsageError(f"--workers {args.workers} must be 0 (no Dask) or more")
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
    classes = int(np.prod(graph.tensors[output].shape[1:]))
    data = load_data(args, in_shape)
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


def _client(args: argparse.Namespace):
    """A Dask client: on ``--scheduler``, else on a new local cluster."""
    import logging

    from distributed import Client, LocalCluster

    if args.scheduler:
        try:
            return Client(args.scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"--scheduler {args.scheduler!r}: cannot connect: {exc}") from None
    workers = args.workers or os.cpu_count() or 1
    # one single-threaded process per worker, and BLAS kept to one thread inside each
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR,
                           env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                "MKL_NUM_THREADS": "1"})
    return Client(cluster)


def _run_dask(client, spec, items, acc, bar, window: int) -> None:
    """Submit chunks with at most ``window`` in flight; tally them as they complete."""
    from distributed import as_completed

    from tengine_host.errors import TengineInputError
    from tengine_host.evaluate import evaluate_chunk

    [spec_future] = client.scatter([spec], broadcast=True)   # the model travels once
    labels: dict[int, np.ndarray] = {}
    pending = as_completed()
    items = iter(items)

    def submit_next() -> None:
        item = next(items, None)
        if item is not None:
            start, x, y = item
            labels[start] = y
            pending.add(client.submit(evaluate_chunk, spec_future, start, x, pure=False))

    for _ in range(window):
        submit_next()
    for future in pending:
        try:
            start, top_fp, top_q = future.result()
        except TengineInputError as exc:    # the model or a sample the worker could not run
            raise UsageError(f"a Dask worker failed: {exc}") from None
        y = labels.pop(start)
        acc.add(start, y, top_fp, top_q)
        bar.update(len(y))
        submit_next()


def evaluate(args: argparse.Namespace) -> tuple[dict, int]:
    """Run the evaluation; returns the result document and the number of workers
    (0: in this process)."""
    from tengine_host.evaluate import Accuracy, evaluate_chunk
    from tengine_host.quant.progress import progress_bar

    spec, data, classes = _prepare(args)
    acc = Accuracy(spec.int8_label)
    started = time.perf_counter()
    items = _chunks(data, args, classes, args.device, spec.table)
    with progress_bar(_total(data, args), "eval", enabled=not args.no_progress) as bar:
        if args.workers == 0 and not args.scheduler:
            for start, x, y in items:
                _, top_fp, top_q = evaluate_chunk(spec, start, x)
                acc.add(start, y, top_fp, top_q)
                bar.update(len(y))
            return acc.as_dict(time.perf_counter() - started), 0
        client = _client(args)
        try:
            workers = len(client.nthreads())
            if workers == 0:
                raise UsageError(f"the Dask cluster at {args.scheduler} has no workers")
            _run_dask(client, spec, items, acc, bar, window=2 * sum(client.nthreads().values()))
        finally:
            cluster = None if args.scheduler else client.cluster
            client.close()
            if cluster is not None:
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
