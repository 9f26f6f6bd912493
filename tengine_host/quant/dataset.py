"""Calibration inputs from ``.npy`` / ``.npz`` files or a folder of images."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from accel.ir import Graph
from tengine_host.errors import TengineInputError, reason

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".gif", ".tif", ".tiff")

#: PIL modes whose pixels are wider than 8 bits, and the value that stands for full
#: white in each: 16-bit integers (PNG, TIFF, PGM; PIL opens 16-bit grey as "I" or
#: "I;16*") and float pixels, which are taken as values on the 8-bit scale already.
WIDE_MODES = {"I;16": 65535, "I;16B": 65535, "I;16L": 65535, "I;16N": 65535, "I": 65535,
              "F": 255}


def _split_samples(name: str, arr: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    """One array per sample: ``arr`` is one input, a stack of inputs, or a batch of rows."""
    if arr.shape == shape:
        return [arr]
    if arr.shape[1:] == shape:
        return list(arr)
    if shape and shape[0] == 1 and arr.shape[1:] == shape[1:]:
        return [a[None] for a in arr]
    raise TengineInputError(f"array {name!r} has shape {arr.shape}; input {name!r} needs "
                            f"{shape}, a stack [S, *{shape}] or rows [S, *{shape[1:]}]")


def load_arrays(path: str | Path, graph: Graph) -> list[dict[str, np.ndarray]]:
    """Samples from ``.npz`` (one array per model input, named after it) or ``.npy``
    (single-input models only)."""
    path = Path(path)
    if path.suffix not in (".npy", ".npz"):
        raise TengineInputError(f"calibration file {str(path)!r} must be .npy or .npz")
    if path.suffix == ".npy" and len(graph.inputs) != 1:
        raise TengineInputError(f"{str(path)!r}: a .npy file feeds one input, the model has "
                                f"{graph.inputs}; use an .npz with arrays named after them")
    try:
        if path.suffix == ".npy":
            arrays = {graph.inputs[0]: np.load(path)}
        else:
            with np.load(path) as npz:
                arrays = {k: npz[k] for k in npz.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:  # unreadable/truncated
        raise TengineInputError(f"cannot read calibration file {str(path)!r}: "
                                f"{reason(exc, path)}") from exc
    missing = [n for n in graph.inputs if n not in arrays]
    if missing:
        raise TengineInputError(f"{str(path)!r} has arrays {sorted(arrays)}; missing model "
                                f"inputs {missing}")
    for n in graph.inputs:
        kind = arrays[n].dtype
        if not (np.issubdtype(kind, np.floating) or np.issubdtype(kind, np.integer)):
            raise TengineInputError(f"{str(path)!r}: array {n!r} has dtype {kind}; inputs are "
                                    f"real numbers (float or integer arrays)")
    try:
        per_input = {n: _split_samples(n, arrays[n], graph.tensors[n].shape)
                     for n in graph.inputs}
    except TengineInputError as exc:
        raise TengineInputError(f"{str(path)!r}: {exc}") from None
    counts = {n: len(v) for n, v in per_input.items()}
    if len(set(counts.values())) != 1:
        raise TengineInputError(f"{str(path)!r}: inputs have different sample counts: "
                                f"{counts}")
    dtype = {n: graph.tensors[n].dtype for n in graph.inputs}
    return [{n: per_input[n][i].astype(dtype[n]) for n in graph.inputs}
            for i in range(next(iter(counts.values())))]


def _fit(img, w: int, h: int, center_crop: bool, letterbox: bool):
    """Resize a PIL image to ``w x h``: stretch, center crop or letterbox.

    Center crop scales the shorter side to the target and cuts the middle out;
    letterbox scales the longer side to the target and centers the image on a
    canvas whose padding becomes 0 after ``(pixel - mean) * scale`` (the
    padding is filled with the mean by the caller's normalization).
    """
    from PIL import Image

    if not (center_crop or letterbox):
        return img.resize((w, h), Image.BILINEAR), None
    iw, ih = img.size
    ratio = max(w / iw, h / ih) if center_crop else min(w / iw, h / ih)
    nw, nh = max(1, round(iw * ratio)), max(1, round(ih * ratio))
    img = img.resize((nw, nh), Image.BILINEAR)
    if center_crop:
        left, top = (nw - w) // 2, (nh - h) // 2
        return img.crop((left, top, left + w, top + h)), None
    canvas = Image.new(img.mode, (w, h))
    left, top = (w - nw) // 2, (h - nh) // 2
    canvas.paste(img, (left, top))
    inside = np.zeros((h, w), dtype=bool)
    inside[top:top + nh, left:left + nw] = True
    return canvas, inside


def _by_value(img, channels: int, path):
    """``img`` as L (``channels`` 1) or RGB, with pixel values on the 8-bit scale.

    ``convert("L")`` clips wider pixels instead of scaling them (a 16-bit PNG becomes
    almost all white), so a :data:`WIDE_MODES` image becomes a float ("F") image of
    its values times ``255 / white``, kept grey (the caller repeats it for RGB).  Every
    other mode converts by value as PIL defines it: palette through the palette, an
    alpha channel dropped, bilevel to 0/255, RGB to grey by ITU-R 601-2 luma.
    """
    from PIL import Image

    if img.mode not in WIDE_MODES:
        return img.convert("L" if channels == 1 else "RGB")
    white = WIDE_MODES[img.mode]
    values = np.asarray(img, dtype=np.float64)
    if values.size and not (np.isfinite(values).all() and values.min() >= 0
                            and values.max() <= white):
        raise TengineInputError(f"image {str(path)!r} (PIL mode {img.mode}) has pixel values "
                                f"in [{values.min():g}, {values.max():g}]; mode {img.mode} "
                                f"must hold values in [0, {white}]")
    return Image.fromarray((values * (255.0 / white)).astype(np.float32), "F")


def load_image(path: str | Path, dims: tuple[int, int, int], mean: tuple[float, ...],
               scale: tuple[float, ...], *, swap_rb: bool = False, center_crop: bool = False,
               letterbox: bool = False) -> np.ndarray:
    """One image as float32 [1, C, H, W]: fitted to H x W, ``(pixel - mean[c]) * scale[c]``.

    Pixels are read by value on the 8-bit scale whatever the file's depth or PIL mode
    (:func:`_by_value`).

    ``swap_rb`` reverses the channel order (RGB -> BGR, for models trained on
    OpenCV's BGR); ``center_crop`` / ``letterbox`` keep the aspect ratio
    (see :func:`_fit`; letterbox padding is 0 after normalization).
    """
    from PIL import Image, UnidentifiedImageError

    c, h, w = dims
    if c not in (1, 3):
        raise TengineInputError(f"image channels must be 1 or 3, got {c}")
    if not all(np.isfinite(v) and v != 0 for v in scale):
        raise TengineInputError(f"image scale {','.join(f'{v:g}' for v in scale)}: every value "
                                f"must be finite and nonzero (a zero scale makes the channel "
                                f"all zero)")
    if center_crop and letterbox:
        raise TengineInputError("center crop and letterbox exclude each other")
    try:
        with Image.open(path) as img:
            img, inside = _fit(_by_value(img, c, path), w, h, center_crop, letterbox)
            arr = np.asarray(img, dtype=np.float32)
    except UnidentifiedImageError as exc:      # its message repeats the path
        raise TengineInputError(f"cannot read image {str(path)!r}: not an image format PIL "
                                f"reads ({', '.join(IMAGE_SUFFIXES)}, ...)") from exc
    except OSError as exc:
        raise TengineInputError(f"cannot read image {str(path)!r}: "
                                f"{reason(exc, path)}") from exc
    arr = arr[..., None] if arr.ndim == 2 else arr
    arr = np.repeat(arr, c, axis=2) if arr.shape[2] != c else arr   # wide grey for RGB
    arr = arr.transpose(2, 0, 1)
    if swap_rb and c == 3:
        arr = arr[::-1]
    m = np.broadcast_to(np.asarray(mean, np.float32), (c,)).reshape(c, 1, 1)
    s = np.broadcast_to(np.asarray(scale, np.float32), (c,)).reshape(c, 1, 1)
    out = (arr - m) * s
    if inside is not None:
        out = np.where(inside, out, np.float32(0))
    return np.ascontiguousarray(out, dtype=np.float32)[None]


def load_images(folder: str | Path, graph: Graph, dims: tuple[int, int, int],
                mean: tuple[float, ...] = (0.0,), scale: tuple[float, ...] = (1.0,),
                **fit: bool) -> list[dict[str, np.ndarray]]:
    """One sample per image file in ``folder`` (sorted), for a single-input model.

    ``fit`` are :func:`load_image`'s keywords (``swap_rb``, ``center_crop``, ``letterbox``).
    """
    folder = Path(folder)
    if len(graph.inputs) != 1:
        raise TengineInputError(f"an image folder ({str(folder)!r}) feeds one input, the "
                                f"model has {graph.inputs}")
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    except OSError as exc:
        raise TengineInputError(f"cannot read calibration folder {str(folder)!r}: "
                                f"{reason(exc, folder)}") from exc
    if not files:
        raise TengineInputError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {str(folder)!r}")
    name = graph.inputs[0]
    want = graph.tensors[name].shape
    if want[1:] != tuple(dims):
        raise TengineInputError(f"-g {','.join(map(str, dims))} does not match input "
                                f"{name!r} of shape {want}")
    return [{name: load_image(f, dims, mean, scale, **fit)} for f in files]
