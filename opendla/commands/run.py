"""``opendla run MODEL --input NAME=x.npy``: inference on the host engine's devices."""

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
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input array (repeat per input; NAME= may be omitted for one input)")
    p.add_argument("--precision", choices=("fp32", "int8"), default="fp32",
                   help="CPU precision (int8 runs Conv/Gemm through the int8 reference)")
    p.add_argument("--calib", help="calibration table from 'opendla quantize' (for int8)")
    p.add_argument("--save-outputs", metavar="DIR", help="write each output as DIR/<name>.npy")
    p.add_argument("--top-k", type=int, default=5, help="classes to list for 2-D outputs")
    p.add_argument("--json", action="store_true", help="print a JSON summary")


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
        feeds[name] = np.load(path)
    missing = [n for n in graph_inputs if n not in feeds]
    if missing:
        raise ValueError(f"missing --input for {', '.join(missing)}")
    return feeds


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


def run(args: argparse.Namespace) -> int:
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model
    from tengine_host.quant import load_table

    try:
        graph = load_model(args.model)
        feeds = parse_inputs(args.input, graph.inputs)
        table = load_table(args.calib) if args.calib else None
        if args.precision == "int8" and table is None:
            raise ValueError("--precision int8 needs --calib calib.json (opendla quantize)")
        cpu = get_device("cpu", precision=args.precision)
        devices = [cpu] if args.device == "cpu" else [get_device(args.device), cpu]
        with Executor(graph, devices, table) as ex:
            outputs = ex.run(feeds)
    except (OnnxImportError, ValueError, KeyError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    summaries = [summarize(n, v, args.top_k) for n, v in outputs.items()]
    if args.save_outputs:
        import numpy as np

        out_dir = Path(args.save_outputs)
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            np.save(out_dir / f"{name.replace('/', '_')}.npy", value)
    if args.json:
        print(json.dumps({"partition": ex.partition.report().splitlines(),
                          "outputs": summaries,
                          "subgraph_ms": {k: s * 1e3 for k, s in ex.subgraph_times}}, indent=1))
        return 0
    print(ex.partition.report())
    for s in summaries:
        print(f"output {s['name']}: shape {tuple(s['shape'])} {s['dtype']} "
              f"min {s['min']:.6g} max {s['max']:.6g} mean {s['mean']:.6g}")
        for row, top in enumerate(s.get("top_k", [])):
            print(f"  [{row}] top-{len(top)}: " + ", ".join(f"{i}:{p:.4f}" for i, p in top))
    total = sum(sec for _, sec in ex.subgraph_times)
    print(f"time: {total * 1e3:.3f} ms (" + ", ".join(
        f"{k} {sec * 1e3:.3f} ms" for k, sec in ex.subgraph_times) + ")")
    return 0
