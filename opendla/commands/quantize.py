"""``opendla quantize MODEL -i INPUTS -o calib.json``: min-max calibration table."""

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


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("quantize", help="calibrate activation scales (min-max) to JSON",
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
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tengine_host.frontend import OnnxImportError
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate, save_table
    from tengine_host.quant.dataset import load_arrays, load_images

    try:
        graph = load_model(args.model)
        src = Path(args.inputs)
        if src.is_dir():
            if args.dims is None:
                raise ValueError("an image folder needs -g C,H,W")
            samples = load_images(src, graph, args.dims, args.mean, args.scale)
        elif src.is_file():
            samples = load_arrays(src, graph)
        else:
            raise ValueError(f"calibration input {str(src)!r} does not exist")
        table = calibrate(graph, samples, progress=not args.no_progress)
    except (OnnxImportError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    save_table(table, args.output)
    print(f"calibrated {len(table)} tensors over {len(samples)} samples -> {args.output}")
    return 0
