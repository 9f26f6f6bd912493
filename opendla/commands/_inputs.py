"""Input handling shared by ``run``, ``compare`` and ``eval``.

* arrays: ``--input [NAME=]FILE`` with ``.npy`` or ``.npz`` files;
* images: the preprocessing options of ``opendla quantize`` (Tengine's
  ``-g -w -s -b -c -y``), with ``-g`` defaulting to the model input's C,H,W;
* label files for top-k names; checks that inputs are finite.

Every problem is a :class:`~opendla.errors.UsageError` naming the option and
the value at fault.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from opendla.errors import UsageError
from tengine_host.errors import TengineInputError, reason


# ------------------------------------------------------------------ option types
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
    if min(c, h, w) <= 0:
        raise argparse.ArgumentTypeError(f"C,H,W must be positive, got {text!r}")
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


def add_image_options(p: argparse.ArgumentParser) -> None:
    """``-g -w -s -b -c -y``, as ``opendla quantize`` takes them."""
    g = p.add_argument_group("image preprocessing (as in 'opendla quantize')")
    g.add_argument("-g", "--dims", type=_dims, metavar="C,H,W",
                   help="image input dims (default: the model input's C,H,W)")
    g.add_argument("-w", "--mean", type=_floats, default=(0.0,), metavar="M[,M,M]",
                   help="per-channel mean subtracted from pixels, e.g. 123.7,116.3,103.5")
    g.add_argument("-s", "--scale", type=_floats, default=(1.0,), metavar="S[,S,S]",
                   help="per-channel scale applied after the mean, e.g. 0.0171")
    g.add_argument("-b", "--swap-rb", type=_flag, default=False, metavar="0|1",
                   help="swap the first and last channel of RGB images (default 0)")
    g.add_argument("-c", "--center-crop", type=_flag, default=False, metavar="0|1",
                   help="keep the aspect ratio and crop the center (default 0)")
    g.add_argument("-y", "--letterbox", type=_rows_cols, metavar="ROWS,COLS",
                   help="keep the aspect ratio and pad to ROWS,COLS (must match H,W)")


def add_input_options(p: argparse.ArgumentParser) -> None:
    """``--input``, ``--image`` with the image options, and ``--input-shape``."""
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE",
                   help="input arrays: .npy, or .npz with arrays named after the inputs "
                        "(repeat per input; NAME= may be omitted for one input or an .npz); "
                        "a batch runs sample by sample")
    p.add_argument("--image", action="append", default=[], metavar="FILE",
                   help="an image for a one-input model (repeat for a batch); see the "
                        "preprocessing options")
    add_image_options(p)
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="fix the shape of an input with dynamic dimensions the data does not "
                        "fix (repeatable)")


def image_dims(args: argparse.Namespace, shape: Sequence[int] | None) -> tuple[int, int, int]:
    """``-g`` or, without it, C,H,W of the model input ``shape`` ([1, C, H, W])."""
    if args.dims is not None:
        dims = tuple(args.dims)
    elif shape is not None and len(shape) == 4:
        dims = tuple(int(d) for d in shape[1:])
    else:
        raise UsageError(f"images need -g C,H,W: the model input has shape "
                         f"{tuple(shape) if shape is not None else 'unknown'}")
    return dims  # type: ignore[return-value]


def image_options(args: argparse.Namespace, dims: tuple[int, int, int]) -> dict:
    """Keywords of :func:`tengine_host.quant.dataset.load_image`, checked against ``dims``."""
    c, h, w = dims
    if c not in (1, 3):
        raise UsageError(f"-g {c},{h},{w}: images have 1 or 3 channels")
    if not all(v != 0 for v in args.scale):
        raise UsageError(f"-s {','.join(f'{v:g}' for v in args.scale)}: a zero scale makes "
                         f"every pixel of its channel 0; give nonzero values")
    for opt, values in (("-w", args.mean), ("-s", args.scale)):
        if len(values) not in (1, c):
            allowed = "one value" if c == 1 else f"1 value or {c} (one per channel)"
            raise UsageError(f"{opt} {','.join(f'{v:g}' for v in values)}: the image has {c} "
                             f"channel(s); give {allowed}")
    if args.center_crop and args.letterbox:
        raise UsageError("-c 1 and -y exclude each other: crop or letterbox, not both")
    if args.letterbox and tuple(args.letterbox) != (h, w):
        raise UsageError(f"-y {args.letterbox[0]},{args.letterbox[1]} must match the image "
                         f"H,W = {h},{w}")
    return {"dims": dims, "mean": args.mean, "scale": args.scale, "swap_rb": args.swap_rb,
            "center_crop": args.center_crop, "letterbox": args.letterbox is not None}


def load_image_batch(paths: Sequence[str | Path], options: dict) -> np.ndarray:
    """float32 ``[len(paths), C, H, W]`` of the preprocessed images."""
    from tengine_host.quant.dataset import load_image

    opts = dict(options)
    dims, mean, scale = opts.pop("dims"), opts.pop("mean"), opts.pop("scale")
    return np.concatenate([load_image(p, dims, mean, scale, **opts) for p in paths])


# ------------------------------------------------------------------ arrays
def read_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npy`` (under the name ``""``) or ``.npz`` file."""
    path = Path(path)
    try:
        if path.suffix == ".npz" or zipfile.is_zipfile(path):
            with np.load(path, allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        return {"": np.load(path, allow_pickle=False)}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:   # what np.load raises
        raise UsageError(f"cannot read {str(path)!r} as .npy/.npz: {reason(exc, path)}") from None


def parse_inputs(specs: Sequence[str], names: Sequence[str]) -> dict[str, np.ndarray]:
    """``--input [NAME=]FILE`` values -> one array per model input ``names``.

    A bare ``.npz`` feeds every input from the array of the same name (or, for
    a one-input model, from its only array); ``NAME=FILE.npz`` takes array
    ``NAME`` or the file's only array; ``.npy`` holds one array.
    """
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        if name and name not in names:
            raise UsageError(f"--input {spec!r}: {name!r} is not a model input "
                             f"({', '.join(names)})")
        arrays = read_arrays(path)
        for key, v in arrays.items():
            if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
                what = f"array {key!r}" if key else "the array"
                raise UsageError(f"--input {spec!r}: {what} has dtype {v.dtype}; model "
                                 f"inputs take real numbers (float or integer arrays)")
        targets = [name] if name else list(names)
        if len(arrays) == 1 and len(targets) == 1:
            feeds[targets[0]] = next(iter(arrays.values()))
            continue
        if "" in arrays:      # one .npy for several inputs
            raise UsageError(f"--input {spec!r}: a .npy holds one array; the model has inputs "
                             f"{', '.join(names)}: use NAME=FILE per input or an .npz")
        found = {t: arrays[t] for t in targets if t in arrays}
        unused = sorted(set(arrays) - set(names))
        if found and unused and not name:     # a bare .npz: every array feeds an input
            raise UsageError(f"--input {spec!r}: array(s) {', '.join(unused)} are not model "
                             f"inputs ({', '.join(names)}); remove them or pick one with "
                             f"NAME=FILE.npz")
        if not found:
            raise UsageError(f"--input {spec!r}: the file has arrays {', '.join(sorted(arrays))}"
                             f"; none is named after a model input ({', '.join(names)})")
        feeds.update(found)
    missing = [n for n in names if n not in feeds]
    if missing:
        raise UsageError(f"no --input for {', '.join(missing)} (the model's inputs: "
                         f"{', '.join(names)})")
    for name, v in feeds.items():
        if v.ndim == 0 or v.shape[0] == 0:
            raise UsageError(f"input {name!r} has shape {v.shape}: it holds no sample")
    return feeds


def warn_int8_inputs(feeds: dict[str, np.ndarray], table, where: str) -> bool:
    """Refuse NaN/Inf inputs and print a ``warning:`` for each input ``table`` saturates
    (:func:`tengine_host.quant.input_check.check_int8_inputs`, the one check of every
    int8 path); True if it warned."""
    from tengine_host.quant.input_check import check_int8_inputs

    messages = check_int8_inputs(feeds, table, where)
    for message in messages:
        print(f"warning: {message}", file=sys.stderr)
    return bool(messages)


# ------------------------------------------------------------------ labels
def load_labels(path: str | Path) -> list[str]:
    """Class names, one per line (blank lines keep their index)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--labels {str(path)!r}: cannot read: {reason(exc, path)}") from None
    labels = [line.strip() for line in text.splitlines()]
    while labels and not labels[-1]:
        labels.pop()
    if not labels:
        raise UsageError(f"--labels {str(path)!r} is empty; give one class name per line")
    return labels


# ------------------------------------------------------------------ --keep-float
def add_keep_float_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep-float", default=None, metavar="NAME,...",
                   help="nodes (or the tensors they produce) to keep in fp32 on the CPU "
                        "although the DLA could run them (see 'opendla quantize "
                        "--sensitivity' for which matter); default: the nodes the "
                        "calibration table was checked with in fp32 (quantize --keep-float), "
                        "'' for none")


def keep_float_nodes(args: argparse.Namespace, graph, table=None) -> frozenset[str]:
    """The node names ``--keep-float`` gives; without the option, those ``table`` records
    (:attr:`~tengine_host.quant.table.QuantTable.keep_float`), else none.  A usage error
    names an unknown one with the nearest names of the model."""
    from tengine_host.partition import resolve_keep_float

    given = getattr(args, "keep_float", None)
    if given is None:
        names = list(getattr(table, "keep_float", ()))
    else:
        names = [n for n in given.split(",") if n]
    try:
        return resolve_keep_float(graph, names)
    except TengineInputError as exc:
        where = "" if given is not None else \
            "the calibration table's keep-float list (written by quantize --keep-float): "
        raise UsageError(f"{where}{exc}") from None
