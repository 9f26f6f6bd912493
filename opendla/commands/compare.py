"""``opendla compare MODEL --calib C --input x.npy``: every DLA tensor, fp32 vs int8 vs DLA.

The model is partitioned as ``opendla run --device nvdla`` does.  For each
tensor the DLA computes, in execution order, the table gives its cosine
similarity and maximum absolute error against fp32, once for the int8 CPU
reference of the same partition and once for the simulated DLA, and whether
the DLA equals the reference byte for byte.  The first tensor where they
differ is marked: that is where the hardware (or the compiler) went wrong.
The model outputs follow, with top-1 agreement for 2-D outputs.

Inputs as for ``opendla run`` (``--input`` arrays, a batch compares every
sample, or ``--image`` files with the quantize preprocessing options).
``--plot out.png`` draws the per-layer cosine and error; ``--json`` prints
everything.  Exit status 1 when the DLA differs from the int8 reference.

Example::

    opendla quantize mobilenet_v2.onnx -i photos/ -g 3,224,224 \\
        -w 123.7,116.3,103.5 -s 0.0171,0.0175,0.0174 -c 1 -o calib.json
    opendla compare mobilenet_v2.onnx --calib calib.json --image photos/cat.jpg \\
        -w 123.7,116.3,103.5 -s 0.0171,0.0175,0.0174 -c 1 --plot layers.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from accel.config import DEFAULT_PRESET, PRESETS
from opendla.commands._inputs import add_input_options, add_keep_float_option, keep_float_nodes
from opendla.errors import CheckFailed, UsageError
from tengine_host.errors import reason


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compare", help="per-layer fp32 / int8 reference / DLA comparison",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="ONNX model")
    p.add_argument("--calib", required=True, help="calibration table from 'opendla quantize'")
    add_keep_float_option(p)
    p.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"hardware configuration (default {DEFAULT_PRESET})")
    add_input_options(p)
    p.add_argument("--plot", metavar="PNG", help="draw per-layer cosine and error to PNG")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def format_table(doc: dict) -> str:
    """The text report of a comparison (:meth:`Comparison.as_dict` plus model/preset)."""
    first = doc["first_divergent"]
    # the column as wide as the longest name: names are shown whole, never cut
    width = max([len("tensor"), *(len(c["tensor"]) for c in doc["layers"])])
    fused = doc.get("fused", [])
    lines = [f"{doc['model']} on {doc['preset']}: {len(doc['layers'])} DLA tensors, "
             f"{doc['samples']} sample(s)"
             + (f" ({len(fused)} more computed inside the pass after them, never in DLA "
                f"memory: not compared)" if fused else ""), "",
             f"  {'#':>3} {'tensor':<{width}} {'op':<12} {'shape':>14} {'cos int8':>9} "
             f"{'cos DLA':>9} {'max|err| int8':>14} {'max|err| DLA':>13}  bit-exact"]
    for i, c in enumerate(doc["layers"]):
        mark = "  <- first divergent" if c["tensor"] == first else ""
        exact = "yes" if c["bit_exact"] else f"NO ({c['differing']}/{c['total']})"
        lines.append(f"  {i:>3} {c['tensor']:<{width}} {c['op_type'][:12]:<12} "
                     f"{'x'.join(map(str, c['shape'][1:])):>14} {c['cosine_int8_ref']:>9.5f} "
                     f"{c['cosine_dla']:>9.5f} {c['max_abs_int8_ref']:>14.5g} "
                     f"{c['max_abs_dla']:>13.5g}  {exact}{mark}")
    lines += ["", "model outputs against fp32:"]
    for o in doc["outputs"]:
        top1 = (f", top-1 agrees int8 {o['top1_agree_int8_ref']}/{o['samples']}, "
                f"DLA {o['top1_agree_dla']}/{o['samples']}" if o.get("classifier") else "")
        lines.append(f"  {o['name']}: cosine int8 {o['cosine_int8_ref']:.5f}, DLA "
                     f"{o['cosine_dla']:.5f}{top1}")
    if not doc["layers"]:
        lines.append("no tensor ran on the DLA: nothing to compare")
    elif doc["bit_exact"]:
        lines.append("bit-exact: every DLA tensor equals the int8 CPU reference")
    else:
        lines.append(f"NOT bit-exact: first divergent tensor {first!r}")
    return "\n".join(lines)


def check_plot_path(path: str) -> None:
    """Refuse, before the comparison runs, a ``--plot`` file matplotlib cannot write: a
    directory, a missing folder, or an extension that is not one of its formats (no
    extension: matplotlib's default, PNG)."""
    from matplotlib.backend_bases import FigureCanvasBase

    out = Path(path)
    if out.is_dir():
        raise UsageError(f"--plot {path!r} is a directory; give a file name such as plot.png")
    if not out.parent.is_dir():
        raise UsageError(f"--plot {path!r}: folder {str(out.parent)!r} does not exist")
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    ext = out.suffix[1:].lower()
    if ext and ext not in formats:
        raise UsageError(f"--plot {path!r}: matplotlib cannot write .{ext} files; give one of "
                         f"{', '.join('.' + f for f in formats)}")


def plot(doc: dict, path: str) -> None:
    """Per-layer cosine (top) and max |error| (bottom) of both paths against fp32."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = doc["layers"]
    x = list(range(len(layers)))
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True,
                                      figsize=(max(8.0, 0.12 * len(layers) + 4), 6))
    top.plot(x, [c["cosine_int8_ref"] for c in layers], "o-", ms=3, label="int8 CPU reference")
    top.plot(x, [c["cosine_dla"] for c in layers], "x--", ms=4, label="DLA (cmodel)")
    top.set_ylabel("cosine vs fp32")
    top.ticklabel_format(axis="y", useOffset=False)
    top.legend(loc="lower left")
    top.grid(alpha=0.3)
    bottom.semilogy(x, [max(c["max_abs_int8_ref"], 1e-12) for c in layers], "o-", ms=3,
                    label="int8 CPU reference")
    bottom.semilogy(x, [max(c["max_abs_dla"], 1e-12) for c in layers], "x--", ms=4,
                    label="DLA (cmodel)")
    bottom.set_ylabel("max |error| vs fp32")
    bottom.set_xlabel("DLA tensor (execution order)")
    bottom.grid(alpha=0.3)
    first = doc["first_divergent"]
    if first is not None:
        i = next(i for i, c in enumerate(layers) if c["tensor"] == first)
        for ax in (top, bottom):
            ax.axvline(i, color="red", lw=1)
        top.annotate(f"first divergent: {layers[i]['op_type']}", (i, top.get_ylim()[0]),
                     color="red", rotation=90, va="bottom", ha="right", fontsize=8)
    if len(layers) <= 40:
        bottom.set_xticks(x, [c["op_type"] for c in layers], rotation=90, fontsize=7)
    fig.suptitle(f"{Path(doc['model']).name} on {doc['preset']}: {doc['samples']} sample(s)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise UsageError(f"--plot {path!r}: cannot write: {reason(exc, path)}") from None
    finally:
        plt.close(fig)


def run(args: argparse.Namespace) -> int:
    from opendla.commands._inputs import warn_int8_inputs
    from opendla.commands.run import _batch_one, fit_batch, load_onnx_feeds
    from tengine_host.compare import compare_run
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.quant import load_table
    from tengine_host.quant.progress import progress_bar
    from tengine_host.quant.table import check_table

    if not args.input and not args.image:
        raise UsageError("no input: give --input [NAME=]FILE.npy|.npz or --image FILE")
    if args.input and args.image:
        raise UsageError("give --input arrays or --image files, not both")
    if not Path(args.model).is_file():
        raise UsageError(f"model {args.model!r} does not exist")
    if args.plot:
        check_plot_path(args.plot)
    graph, feeds, shapes = load_onnx_feeds(args)
    table = load_table(args.calib)
    warn_int8_inputs(feeds, table, "compare")
    batch = next(iter(feeds.values())).shape[0]
    graph = _batch_one(args.model, graph, feeds, shapes)   # sample by sample
    fit_batch(args.model, graph, {n: v[:1] for n, v in feeds.items()}, shapes)
    check_table(table, graph, f"calibration table {args.calib!r}")
    devices = [get_device("nvdla", preset=args.preset, capture=True,
                          keep_float=keep_float_nodes(args, graph, table)), get_device("cpu")]
    with Executor(graph, devices, table) as ex, \
            progress_bar(batch, "compare", enabled=not args.no_progress) as bar:
        result = None
        for i in range(batch):
            result = compare_run(ex, {n: v[i:i + 1] for n, v in feeds.items()}, result)
            bar.update()
        # intermediates the compiler computes inside the pass after them (a lookup in a
        # convolution's pass, chains of element-wise passes as one table): never stored
        fused = sorted(t for _, _, handle in ex.prepared
                       for t in getattr(getattr(handle, "compiled", None), "fused", {}))
    doc = {"model": args.model, "preset": args.preset, **result.as_dict(), "fused": fused}
    for o in doc["outputs"]:
        o["classifier"] = len(graph.tensors[o["name"]].shape) == 2
    if args.plot:
        plot(doc, args.plot)
    print(json.dumps(doc, indent=1, default=float) if args.json else format_table(doc))
    if args.plot and not args.json:
        print(f"plot: {args.plot}")
    if doc["layers"] and not doc["bit_exact"]:
        raise CheckFailed(f"the DLA differs from the int8 CPU reference from tensor "
                          f"{doc['first_divergent']!r} on")
    return 0
