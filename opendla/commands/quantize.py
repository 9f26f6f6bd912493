"""``opendla quantize MODEL -i INPUTS -o calib.json``: int8 calibration table.

Options follow Tengine's quant tool: ``-g`` C,H,W, ``-w`` mean, ``-s`` scale,
``-b`` swap R/B, ``-c`` center crop, ``-y`` letterbox, ``-a`` algorithm
(minmax, kl, percentile).  The table maps each tensor to scale, min and max.
Inputs with NaN/Inf are refused; a histogram method whose thresholds clip
far more than min-max would prints a warning naming the tensors.  Dynamic
input shapes are taken from the arrays (or from ``-g`` for images) when
``--input-shape`` does not fix them.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from opendla.commands._inputs import add_image_options, image_dims, image_options
from opendla.errors import UsageError

#: Tengine's -a takes numbers; the names are accepted too.
ALGORITHM_ALIASES = {"0": "minmax", "1": "kl", "2": "percentile"}


def _algorithm(text: str) -> str:
    from tengine_host.quant.calibrate import ALGORITHMS

    algo = ALGORITHM_ALIASES.get(text, text)
    if algo not in ALGORITHMS:
        raise argparse.ArgumentTypeError(f"algorithm {text!r} not in {', '.join(ALGORITHMS)} "
                                         f"(or 0, 1, 2)")
    return algo


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("quantize", help="calibrate activation scales to a JSON table",
                              description=__doc__)
    p.add_argument("model", help="ONNX model")
    p.add_argument("-i", "--inputs", required=True,
                   help=".npz (arrays named after the model inputs), .npy (single input), "
                        "or a folder of images")
    p.add_argument("-o", "--output", required=True, help="calibration table to write (JSON)")
    add_image_options(p)
    p.add_argument("-a", "--algorithm", type=_algorithm, default="minmax",
                   help="minmax (0), kl (1, entropy) or percentile (2); default minmax")
    p.add_argument("--percentile", type=float, default=99.99,
                   help="for -a percentile, in (0, 100] (default 99.99)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="fix a dynamic input shape")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _shapes_from_data(src: Path, names: list[str], dims) -> dict[str, tuple[int, ...]]:
    """Batch-1 input shapes the calibration data fixes: -g for images, else the arrays'."""
    from opendla.commands._inputs import read_arrays

    if src.is_dir():
        return {names[0]: (1, *dims)} if dims is not None and len(names) == 1 else {}
    arrays = read_arrays(src)
    if "" in arrays and len(names) == 1:
        arrays = {names[0]: arrays[""]}
    return {n: (1, *a.shape[1:]) if a.ndim >= 2 else a.shape
            for n, a in arrays.items() if n in names}


def _validate(args: argparse.Namespace) -> Path:
    src = Path(args.inputs)
    if not src.exists():
        raise UsageError(f"-i {args.inputs!r} does not exist (an .npz, an .npy or an image "
                         f"folder)")
    if args.algorithm == "percentile" and not 0 < args.percentile <= 100:
        raise UsageError(f"--percentile {args.percentile:g} must be in (0, 100]")
    out = Path(args.output)
    if out.is_dir():
        raise UsageError(f"-o {args.output!r} is a directory; give a .json file name")
    if not out.parent.exists():
        raise UsageError(f"-o {args.output!r}: folder {str(out.parent)!r} does not exist")
    return src


def run(args: argparse.Namespace) -> int:
    from opendla.commands.run import onnx_input_names, parse_shapes
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate, save_table
    from tengine_host.quant.dataset import load_arrays, load_images

    src = _validate(args)
    shapes = parse_shapes(args.input_shape)
    try:
        try:
            graph = load_model(args.model, input_shapes=shapes or None)
        except OnnxImportError:
            if shapes:
                raise
            # dynamic dimensions: the calibration data fixes them, if it can
            shapes = _shapes_from_data(src, onnx_input_names(args.model), args.dims)
            if not shapes:
                raise
            graph = load_model(args.model, input_shapes=shapes)
        if src.is_dir():
            dims = image_dims(args, graph.tensors[graph.inputs[0]].shape)
            opts = image_options(args, dims)
            samples = load_images(src, graph, dims, opts["mean"], opts["scale"],
                                  swap_rb=opts["swap_rb"], center_crop=opts["center_crop"],
                                  letterbox=opts["letterbox"])
        else:
            samples = load_arrays(src, graph)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = calibrate(graph, samples, algorithm=args.algorithm,
                              progress=not args.no_progress, percentile=args.percentile)
    except (OnnxImportError, ValueError, KeyError, OSError) as exc:
        raise UsageError(str(exc)) from None
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    try:
        save_table(table, args.output)
    except OSError as exc:
        raise UsageError(f"-o {args.output!r}: cannot write: {exc}") from None
    print(f"calibrated {len(table)} tensors over {len(samples)} samples ({args.algorithm}) "
          f"-> {args.output}")
    return 0
