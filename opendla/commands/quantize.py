"""``opendla quantize MODEL -i INPUTS -o calib.json``: int8 calibration table.

Options follow Tengine's quant tool: ``-g`` C,H,W, ``-w`` mean, ``-s`` scale,
``-b`` swap R/B, ``-c`` center crop, ``-y`` letterbox, ``-a`` algorithm
(minmax, kl, percentile).  The table maps each tensor to scale, min and max.
"""

from __future__ import annotations

import argparse
import sys


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}") from None


def _dims(text: str) -> tuple[int, int, int]:
    try:
        c, h, w = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected C,H,W (three integers), got {text!r}") from None
    return c, h, w


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise argparse.ArgumentTypeError(f"expected 0 or 1, got {text!r}")
    return text == "1"


def _rows_cols(text: str) -> tuple[int, int]:
    try:
        rows, cols = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ROWS,COLS, got {text!r}") from None
    return rows, cols


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
    p.add_argument("-g", "--dims", type=_dims, help="image input dims C,H,W (image folders)")
    p.add_argument("-w", "--mean", type=_floats, default=(0.0,),
                   help="per-channel mean subtracted from pixels, e.g. 104,117,123")
    p.add_argument("-s", "--scale", type=_floats, default=(1.0,),
                   help="per-channel scale applied after the mean, e.g. 0.0039")
    p.add_argument("-b", "--swap-rb", type=_flag, default=False, metavar="0|1",
                   help="swap the first and last channel of RGB images (default 0)")
    p.add_argument("-c", "--center-crop", type=_flag, default=False, metavar="0|1",
                   help="keep the aspect ratio and crop the center (default 0)")
    p.add_argument("-y", "--letterbox", type=_rows_cols, metavar="ROWS,COLS",
                   help="keep the aspect ratio and pad to ROWS,COLS (must match -g H,W)")
    p.add_argument("-a", "--algorithm", type=_algorithm, default="minmax",
                   help="minmax (0), kl (1, TensorRT entropy) or percentile (2); default minmax")
    p.add_argument("--percentile", type=float, default=99.99,
                   help="for -a percentile (default 99.99)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="fix a dynamic input shape")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from opendla.commands.run import parse_shapes
    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate, save_table
    from tengine_host.quant.dataset import load_arrays, load_images

    try:
        graph = load_model(args.model, input_shapes=parse_shapes(args.input_shape))
        src = Path(args.inputs)
        if src.is_dir():
            if args.dims is None:
                raise ValueError("an image folder needs -g C,H,W")
            if args.letterbox and tuple(args.letterbox) != tuple(args.dims[1:]):
                raise ValueError(f"-y {args.letterbox[0]},{args.letterbox[1]} must match "
                                 f"-g H,W = {args.dims[1]},{args.dims[2]}")
            samples = load_images(src, graph, args.dims, args.mean, args.scale,
                                  swap_rb=args.swap_rb, center_crop=args.center_crop,
                                  letterbox=args.letterbox is not None)
        elif src.is_file():
            samples = load_arrays(src, graph)
        else:
            raise ValueError(f"calibration input {str(src)!r} does not exist")
        table = calibrate(graph, samples, algorithm=args.algorithm,
                          progress=not args.no_progress, percentile=args.percentile)
    except (OnnxImportError, ValueError, KeyError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        save_table(table, args.output)
    except OSError as exc:
        print(f"error: cannot write {args.output!r}: {exc}", file=sys.stderr)
        return 2
    print(f"calibrated {len(table)} tensors over {len(samples)} samples ({args.algorithm}) "
          f"-> {args.output}")
    return 0
