"""``opendla run MODEL --input NAME=x.npy``: inference on the host engine's devices.

``--verify`` (with ``--device nvdla``) checks every tensor the DLA computes
against the int8 CPU reference of the same partition (:mod:`tengine_host.verify`).

Scriptable: ``--input-shape NAME=1,3,224,224`` fixes dynamic dimensions,
``--input`` takes any batch size the model allows (a batch-1 model runs a
larger batch sample by sample), ``--precision int8 --calib calib.json`` runs
the DLA's ops through the int8 reference, ``--save-outputs DIR`` writes
``DIR/<output>.npy``.  ``--debug-graph/-time/-data/-ref`` are Tengine's
``TG_DEBUG_*`` switches (the environment variables work too).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("run", help="run an ONNX model (cpu, or nvdla with CPU fallback)",
                              description=__doc__)
    p.add_argument("model", help="ONNX model")
    p.add_argument("--device", default="cpu",
                   help="device to run on; ops it cannot run fall back to the CPU (default cpu)")
    p.add_argument("--preset", default="nv_small",
                   help="hardware configuration of --device nvdla (accel.config.PRESETS; "
                        "default nv_small)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input array (repeat per input; NAME= may be omitted for one input)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="fix the shape of an input with dynamic dimensions (repeatable)")
    p.add_argument("--precision", choices=("fp32", "int8"), default="fp32",
                   help="CPU precision (int8 runs the DLA's ops through the int8 reference)")
    p.add_argument("--verify", action="store_true",
                   help="with --device nvdla: also run the int8 CPU reference of the same "
                        "partition and check every DLA tensor byte for byte (exit 1 on a "
                        "mismatch)")
    p.add_argument("--calib", help="calibration table from 'opendla quantize' (for int8)")
    p.add_argument("--save-outputs", metavar="DIR", help="write each output as DIR/<name>.npy")
    p.add_argument("--top-k", type=int, default=5, help="classes to list for 2-D outputs")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--debug-graph", action="store_true",
                   help="print the graph after shape inference (TG_DEBUG_GRAPH)")
    p.add_argument("--debug-time", action="store_true",
                   help="print the per-node time table (TG_DEBUG_TIME)")
    p.add_argument("--debug-data", nargs="?", const="output", metavar="DIR",
                   help="dump every node's inputs/outputs as .npy to DIR (default ./output; "
                        "TG_DEBUG_DATA)")
    p.add_argument("--debug-ref", action="store_true",
                   help="naive reference kernels instead of optimized ones (TG_DEBUG_REF)")


def parse_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    """``NAME=1,3,224,224`` strings -> ``{NAME: (1, 3, 224, 224)}``."""
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d <= 0 for d in shape):
            raise ValueError(f"--input-shape {spec!r} must be NAME=D0,D1,... with positive "
                             f"integers")
        shapes[name] = shape
    return shapes


def parse_inputs(specs: list[str], graph_inputs: list[str]) -> dict:
    """``NAME=path.npy`` pairs -> arrays; a bare path feeds a single-input model."""
    import numpy as np

    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            if len(graph_inputs) != 1:
                raise ValueError(f"--input {spec!r} needs NAME=FILE: the model has inputs "
                                 f"{', '.join(graph_inputs)}")
            name, path = graph_inputs[0], spec
        if name not in graph_inputs:
            raise ValueError(f"--input name {name!r} not in {', '.join(graph_inputs)}")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"--input {name}: cannot read {path!r} as .npy: {exc}") from None
    missing = [n for n in graph_inputs if n not in feeds]
    if missing:
        raise ValueError(f"missing --input for {', '.join(missing)}")
    return feeds


def check_dtypes(graph, feeds: dict) -> dict:
    """Cast feeds to the model's input dtypes when that loses nothing; else a clear error."""
    import numpy as np

    out = {}
    for name, v in feeds.items():
        want = np.dtype(graph.tensors[name].dtype)
        got = v.dtype
        same_kind = (np.issubdtype(got, np.floating) and np.issubdtype(want, np.floating)) or \
            (np.issubdtype(got, np.integer) and np.issubdtype(want, np.integer))
        if not same_kind:
            raise ValueError(f"input {name!r} has dtype {got}, the model expects {want}")
        out[name] = v.astype(want, copy=False)
    return out


def fit_batch(args: argparse.Namespace, graph, feeds: dict, shapes: dict):
    """The graph to run ``feeds`` with, and whether to run them sample by sample.

    Shapes that differ only in the batch dimension re-import the model with the
    feed's batch; a model whose shapes fix batch 1 runs the batch one sample at
    a time.  Any other difference is an error naming both shapes.
    """
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model

    wrong = {}
    for name, v in feeds.items():
        want = graph.tensors[name].shape
        if v.shape == want:
            continue
        if v.ndim != len(want) or v.shape[1:] != want[1:]:
            raise ValueError(f"input {name!r} has shape {v.shape}, the model expects {want} "
                             f"(the batch dimension may differ)")
        wrong[name] = v.shape
    if not wrong:
        return graph, False
    batches = {v.shape[0] for v in feeds.values()}
    if len(batches) != 1:
        raise ValueError(f"inputs disagree on the batch size: "
                         f"{ {n: v.shape[0] for n, v in feeds.items()} }")
    try:
        return load_model(args.model, input_shapes={**shapes, **{n: v.shape
                                                                 for n, v in feeds.items()}}), False
    except OnnxImportError as exc:
        if all(graph.tensors[n].shape[0] == 1 for n in feeds):
            return graph, True
        raise ValueError(f"the model does not accept batch {batches.pop()}: {exc}") from None


def summarize(name: str, value, top_k: int) -> dict:
    """Shape, range and, for [N, classes] outputs, the top-k classes of each row."""
    import numpy as np

    v = np.asarray(value)
    out = {"name": name, "shape": list(v.shape), "dtype": str(v.dtype),
           "min": float(v.min()), "max": float(v.max()), "mean": float(v.mean())}
    if v.ndim == 2 and np.issubdtype(v.dtype, np.floating):
        k = min(top_k, v.shape[1])
        idx = np.argsort(-v, axis=1, kind="stable")[:, :k]
        out["top_k"] = [[[int(i), float(row[i])] for i in r] for row, r in zip(v, idx, strict=True)]
    return out


def _execute(ex, feeds: dict, per_sample: bool, verify: bool = False):
    """Outputs of ``feeds`` (and the verification report with ``verify``)."""
    import numpy as np

    if verify:
        from tengine_host.verify import VerifyReport, verify_run

        report = VerifyReport()
        batch = next(iter(feeds.values())).shape[0]
        runs = [verify_run(ex, {n: v[i:i + 1] for n, v in feeds.items()}, report)[0]
                for i in range(batch)]
        return {name: np.concatenate([r[name] for r in runs]) for name in runs[0]}, report
    if not per_sample:
        return ex.run(feeds), None
    batch = next(iter(feeds.values())).shape[0]
    runs = [ex.run({n: v[i:i + 1] for n, v in feeds.items()}) for i in range(batch)]
    return {name: np.concatenate([r[name] for r in runs]) for name in runs[0]}, None


def _batch_one(args: argparse.Namespace, graph, feeds: dict, shapes: dict):
    """The model for one sample of ``feeds`` (verification runs sample by sample)."""
    from tengine_host.model import load_model

    if all(graph.tensors[n].shape[0] == 1 for n in feeds):
        return graph
    return load_model(args.model, input_shapes={**shapes, **{n: (1, *v.shape[1:])
                                                             for n, v in feeds.items()}})


def run(args: argparse.Namespace) -> int:
    from tengine_host.debug import DebugOptions
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model
    from tengine_host.quant import load_table
    from tengine_host.quant.table import check_table

    debug = DebugOptions.from_env().merged(graph=args.debug_graph, time=args.debug_time,
                                           data=args.debug_data is not None, ref=args.debug_ref)
    if args.debug_data:
        debug = DebugOptions(debug.graph, debug.time, debug.data, debug.ref, args.debug_data)
    try:
        shapes = parse_shapes(args.input_shape)
        graph = load_model(args.model, input_shapes=shapes)  # names unknown inputs
        feeds = check_dtypes(graph, parse_inputs(args.input, graph.inputs))
        graph, per_sample = fit_batch(args, graph, feeds, shapes)
        table = load_table(args.calib) if args.calib else None
        if args.precision == "int8" and table is None:
            raise ValueError("--precision int8 needs --calib calib.json (opendla quantize)")
        if table is not None and (args.precision == "int8" or args.device != "cpu"):
            check_table(table, graph, f"calibration table {args.calib!r}")
        if args.verify:
            if args.device != "nvdla" or table is None:
                raise ValueError("--verify needs --device nvdla and --calib calib.json")
            graph = _batch_one(args, graph, feeds, shapes)
        cpu = get_device("cpu", precision=args.precision, reference=debug.ref,
                         preset=args.preset)
        accel_opts = {"preset": args.preset, "capture": args.verify} \
            if args.device == "nvdla" else {}
        devices = [cpu] if args.device == "cpu" else [get_device(args.device, **accel_opts), cpu]
        with Executor(graph, devices, table, debug=debug) as ex:
            outputs, report = _execute(ex, feeds, per_sample, args.verify)
    except (OnnxImportError, ValueError, KeyError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        return 2

    summaries = [summarize(n, v, args.top_k) for n, v in outputs.items()]
    if args.save_outputs:
        import numpy as np

        out_dir = Path(args.save_outputs)
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            np.save(out_dir / f"{name.replace('/', '_')}.npy", value)
    part = ex.partition
    counts = part.subgraph_counts()
    if args.json:
        doc = {"partition": part.report().splitlines(),
               "subgraphs": {"nvdla": counts.get("nvdla", 0),
                             "cpu": sum(n for d, n in counts.items() if d != "nvdla")},
               "dla_mac_share": part.share("nvdla")[1],
               "dla_op_share": part.share("nvdla")[0],
               "outputs": summaries,
               "subgraph_ms": {k: s * 1e3 for k, s in ex.subgraph_times}}
        if report is not None:
            doc.update(bit_exact=report.bit_exact, layers_checked=report.layers_checked,
                       samples=report.samples,
                       mismatches=[m.as_dict() for m in report.mismatches])
        print(json.dumps(doc, indent=1))
        return 1 if report is not None and not report.bit_exact else 0
    print(part.report())
    for s in summaries:
        print(f"output {s['name']}: shape {tuple(s['shape'])} {s['dtype']} "
              f"min {s['min']:.6g} max {s['max']:.6g} mean {s['mean']:.6g}")
        for row, top in enumerate(s.get("top_k", [])):
            print(f"  [{row}] top-{len(top)}: " + ", ".join(f"{i}:{p:.4f}" for i, p in top))
    total = sum(sec for _, sec in ex.subgraph_times)
    print(f"time: {total * 1e3:.3f} ms (" + ", ".join(
        f"{k} {sec * 1e3:.3f} ms" for k, sec in ex.subgraph_times) + ")")
    if report is not None:
        print(report.summary())
        for m in report.mismatches[:10]:
            print(f"  {m.tensor} ({m.op_type} {m.node}, subgraph {m.subgraph}, sample "
                  f"{m.sample}): {m.differing}/{m.total} differ, max |diff| {m.max_abs_diff}")
        return 0 if report.bit_exact else 1
    return 0
