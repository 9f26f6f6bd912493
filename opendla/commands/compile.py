"""``opendla compile MODEL --calib calib.json -o OUTDIR``: ONNX -> NVDLA loadables.

The model is partitioned between the DLA and the CPU exactly as ``opendla run
--device nvdla`` would (the compiler's own capability predicate decides), and
every DLA subgraph is compiled to one loadable, ``OUTDIR/<model>_<i>.nvdla``,
where ``i`` is the subgraph's index in the printed partition report.  Each
loadable gets a summary: its operations by engine, its DLA memory by kind
(weights, SDP operands, the activation arena after buffer reuse, bound inputs
and outputs) and an estimate of its cycles (the roofline model of
:mod:`accel.cmod.perf`, per operation from its shapes, without running it);
``-v`` lists every operation with its CBUF use.  Each loadable carries a
manifest (:mod:`accel.loadable.manifest`: preset, input/output scales, blob
checksums) so ``opendla run`` can feed it floats.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from accel.config import PRESETS
from opendla.commands._inputs import add_keep_float_option, keep_float_nodes
from opendla.errors import UsageError
from tengine_host.errors import reason


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("compile", help="compile the DLA parts of a model to loadables",
                              description=__doc__)
    p.add_argument("model", help="ONNX model")
    p.add_argument("--calib", required=True,
                   help="calibration table from 'opendla quantize' (JSON)")
    p.add_argument("-o", "--output-dir", default=".", type=Path,
                   help="directory for the .nvdla loadables (default: current directory)")
    add_keep_float_option(p)
    p.add_argument("--preset", default="nv_small", choices=list(PRESETS),
                   help="hardware configuration (default nv_small)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="shape of an input with dynamic dimensions (repeat per input)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="list every operation of each loadable (kernel, shapes, CBUF banks)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")


def _jsonable(v: Any) -> Any:
    """numpy scalars/arrays and tuples in summary rows -> plain JSON values."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (tuple, set)):
        return list(v)
    return str(v)


def _cell(v: Any) -> str:
    if isinstance(v, (tuple, list)):
        return "x".join(str(x) for x in v)
    if isinstance(v, dict):
        return " ".join(f"{k}={_cell(x)}" for k, x in v.items())
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000:
        return f"{v:,}"
    return str(v)


def format_table(rows: list[dict[str, Any]]) -> str:
    """Rows of dicts as an aligned text table; columns in first-seen key order."""
    if not rows:
        return "  (no layers)"
    cols: list[str] = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    cells = [[_cell(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(cols, width, strict=True))]
    lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, width, strict=True))
              for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def estimated_cycles(cfg: Any, op: Any) -> int:
    """Cycles of one engine operation by the cmodel's roofline model
    (:mod:`accel.cmod.perf`), from the operation's shapes alone: a convolution's
    MAC atoms and fetches (its fused SDP included), SDP / PDP / CDP element
    throughput bounded by their DMA, and other engines by their DMA."""
    from accel.cmod import perf
    from accel.compiler.engine import CdpOp, ConvOp, PdpOp, SdpOp

    def elems(region: Any) -> int:
        c, h, w = region.shape
        return -(-c // cfg.atom_size) * cfg.atom_size * h * w

    src, dst = elems(op.src), elems(op.dst)
    if isinstance(op, ConvOp):
        weights = 0 if op.cbuf.weight_reuse else len(op.weights.data)
        sdp = -(-dst // cfg.sdp_bs_throughput)
        return perf.conv_cycles(cfg, op.out_hw, op.kernel, src, weights, sdp)[0]
    if isinstance(op, SdpOp):
        return max(-(-src // cfg.sdp_bs_throughput), perf.dma_cycles(cfg, src + dst))
    if isinstance(op, PdpOp):
        return perf.pdp_cycles(cfg, src, dst, from_memory=True)
    if isinstance(op, CdpOp):
        return perf.cdp_cycles(cfg, src)
    return perf.dma_cycles(cfg, src + dst)


class _CountingBackend:
    """A register backend that only counts the writes it is given."""

    def __init__(self) -> None:
        self.writes = 0

    def write_reg(self, address: int, value: int) -> None:
        self.writes += 1

    def read_reg(self, address: int) -> int:
        return 0


def lut_loads(compiled: Any) -> tuple[int, int]:
    """``(operations that load a lookup table, CSB writes the loads take)``: each unit has
    one LUT, so the firmware writes an op's table (both tables' entries through the access
    port, then its configuration) before the op, as :func:`accel.runtime.fw_lut.load`
    does, whose writes are counted here, unless the unit's op before it loaded the same
    table (the depthwise blocks and row bands of one layer)."""
    from accel.compiler.engine import CdpOp, ConvOp, SdpOp
    from accel.loadable.descriptors import PRECISION_INT8
    from accel.runtime import fw_lut
    from accel.runtime.regwriter import RegWriter

    loads, backend = 0, _CountingBackend()
    held: dict[str, bytes] = {}             # unit -> the table its LUT holds
    for op in compiled.ops:
        lut, unit = None, "NVDLA_SDP"
        if isinstance(op, CdpOp):
            lut, unit = op.lut, "NVDLA_CDP"
        elif isinstance(op, SdpOp):
            lut = op.program.lut
        elif isinstance(op, ConvOp):
            lut = op.sdp.lut
        table = None if lut is None else lut.pack()
        if table is not None and held.get(unit) != table:
            held[unit] = table
            loads += 1
            fw_lut.load(RegWriter(backend), unit, lut, PRECISION_INT8, op.name)
    return loads, backend.writes


def loadable_summary(cfg: Any, compiled: Any) -> dict[str, Any]:
    """Operations by engine, estimated cycles and lookup-table loads of one compiled
    subgraph."""
    engines: dict[str, int] = {}
    for row in compiled.summary():
        engines[row["engine"]] = engines.get(row["engine"], 0) + 1
    loads, writes = lut_loads(compiled)
    return {"operations": len(compiled.ops), "by_engine": engines,
            "estimated_cycles": sum(estimated_cycles(cfg, op) for op in compiled.ops),
            "lut_loads": loads, "lut_register_writes": writes}


def missing_calibration(subgraphs: list[Any], table: dict[str, Any]) -> list[str]:
    """Activation tensors of the DLA subgraphs that have no calibration entry."""
    missing: list[str] = []
    for sub in subgraphs:
        for node in sub.nodes:
            for t in (*node.inputs, *node.outputs):
                if t and not sub.is_constant(t) and t not in table and t not in missing:
                    missing.append(t)
    return missing


def run(args: argparse.Namespace) -> int:
    from accel.config import get_preset
    from opendla.commands.run import parse_shapes
    from tengine_host.devices import get_device
    from tengine_host.model import load_model
    from tengine_host.partition import partition
    from tengine_host.quant import load_table
    from tengine_host.quant.rewrites import with_rewrites

    cfg = get_preset(args.preset)
    # the loader names unknown inputs and contradicting shapes
    graph = load_model(args.model, input_shapes=parse_shapes(args.input_shape) or None)
    table = load_table(args.calib)
    graph = with_rewrites(graph, table)     # the weights the table was calibrated for
    keep = keep_float_nodes(args, graph, table)
    parts = partition(graph, [get_device("nvdla", preset=args.preset, keep_float=keep),
                              get_device("cpu")])
    dla = [(i, sub) for i, (dev, sub) in enumerate(parts.parts) if dev.name == "nvdla"]
    missing = missing_calibration([sub for _, sub in dla], table)
    if missing:
        shown = ", ".join(missing[:8]) + (f", ... ({len(missing)} in all)"
                                          if len(missing) > 8 else "")
        raise UsageError(f"calibration table {args.calib!r} has no entry for tensor(s) the "
                         f"DLA needs: {shown}; re-run 'opendla quantize' on this model "
                         f"(the table must come from the same graph)")

    from accel.compiler import CompileError, compile_subgraph

    stem = Path(args.model).stem
    results = []
    try:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        for i, sub in dla:
            compiled = compile_subgraph(sub, table, cfg)
            data = compiled.to_bytes()
            path = args.output_dir / f"{stem}_{i}.nvdla"
            path.write_bytes(data)
            results.append({"subgraph": i, "name": sub.name, "path": str(path),
                            "bytes": len(data), "dram": compiled.dram_bytes,
                            **loadable_summary(cfg, compiled),
                            "activations_without_reuse": compiled.arena_without_reuse,
                            "layers": compiled.summary()})
    except CompileError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"-o {str(args.output_dir)!r}: cannot write loadables: "
                         f"{reason(exc, args.output_dir)}") from None

    if args.json:
        print(json.dumps({"model": args.model, "preset": cfg.name,
                          "partition": parts.report().splitlines(),
                          "loadables": results}, indent=1, default=_jsonable))
        return 0
    print(parts.report())
    if not results:
        print(f"no subgraph runs on the DLA ({cfg.name}); nothing written")
    for r in results:
        dram = r["dram"]
        engines = ", ".join(f"{n} {e}" for e, n in r["by_engine"].items())
        print(f"[{r['subgraph']}] {r['name']} -> {r['path']} ({r['bytes']:,} bytes)")
        print(f"    {r['operations']} operations: {engines}")
        print(f"    DLA memory {sum(dram.values()):,} bytes: "
              + ", ".join(f"{k} {v:,}" for k, v in dram.items())
              + f" (activations without buffer reuse: {r['activations_without_reuse']:,})")
        print(f"    estimated {r['estimated_cycles']:,} cycles per sample")
        if r["lut_loads"]:
            print(f"    {r['lut_loads']} lookup-table loads before their operations: "
                  f"{r['lut_register_writes']:,} register writes")
        if args.verbose:
            print(format_table(r["layers"]))
    if results and not args.verbose:
        print("(-v lists every operation)")
    return 0
