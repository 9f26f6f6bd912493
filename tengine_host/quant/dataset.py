"""Calibration inputs from ``.npy`` / ``.npz`` files or a folder of images."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from accel.ir import Graph

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".gif", ".tif", ".tiff")


def _split_samples(name: str, arr: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    """One array per sample: ``arr`` is one input, a stack of inputs, or a batch of rows."""
    if arr.shape == shape:
        return [arr]
    if arr.shape[1:] == shape:
        return list(arr)
    if shape and shape[0] == 1 and arr.shape[1:] == shape[1:]:
        return [a[None] for a in arr]
    raise ValueError(f"array {name!r} has shape {arr.shape}; input {name!r} needs {shape}, "
                     f"a stack [S, *{shape}] or rows [S, *{shape[1:]}]")


def load_arrays(path: str | Path, graph: Graph) -> list[dict[str, np.ndarray]]:
    """Samples from ``.npz`` (one array per model input, named after it) or ``.npy``
    (single-input models only)."""
    path = Path(path)
    if path.suffix not in (".npy", ".npz"):
        raise ValueError(f"calibration file {str(path)!r} must be .npy or .npz")
    if path.suffix == ".npy" and len(graph.inputs) != 1:
        raise ValueError(f"{path.name}: a .npy file feeds one input, the model has "
                         f"{graph.inputs}; use an .npz with arrays named after them")
    try:
        if path.suffix == ".npy":
            arrays = {graph.inputs[0]: np.load(path)}
        else:
            with np.load(path) as npz:
                arrays = {k: npz[k] for k in npz.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:  # unreadable/truncated
        raise ValueError(f"cannot read calibration file {str(path)!r}: {exc}") from exc
    missing = [n for n in graph.inputs if n not in arrays]
    if missing:
        raise ValueError(f"{path.name} has arrays {sorted(arrays)}; missing model inputs {missing}")
    per_input = {n: _split_samples(n, arrays[n], graph.tensors[n].shape) for n in graph.inputs}
    counts = {n: len(v) for n, v in per_input.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"inputs have different sample counts: {counts}")
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


def load_image(path: str | Path, dims: tuple[int, int, int], mean: tuple[float, ...],
               scale: tuple[float, ...], *, swap_rb: bool = False, center_crop: bool = False,
               letterbox: bool = False) -> np.ndarray:
    """One image as float32 [1, C, H, W]: fitted to H x W, ``(pixel - mean[c]) * scale[c]``.

    ``swap_rb`` reverses the channel order (RGB -> BGR, for models trained on
    OpenCV's BGR); ``center_crop`` / ``letterbox`` keep the aspect ratio
    (see :func:`_fit`; letterbox padding is 0 after normalization).
    """
    from PIL import Image, UnidentifiedImageError

    c, h, w = dims
    if c not in (1, 3):
        raise ValueError(f"image channels must be 1 or 3, got {c}")
    if center_crop and letterbox:
        raise ValueError("center crop and letterbox exclude each other")
    try:
        with Image.open(path) as img:
            img, inside = _fit(img.convert("L" if c == 1 else "RGB"), w, h, center_crop,
                               letterbox)
            arr = np.asarray(img, dtype=np.float32).reshape(h, w, c).transpose(2, 0, 1)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"cannot read image {str(path)!r}: {exc}") from exc
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
        raise ValueError(f"an image folder feeds one input, the model has {graph.inputs}")
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    except OSError as exc:
        raise ValueError(f"cannot read calibration folder {str(folder)!r}: {exc}") from exc
    if not files:
        raise ValueError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {str(folder)!r}")
    name = graph.inputs[0]
    want = graph.tensors[name].shape
    if want[1:] != tuple(dims):
        raise ValueError(f"-g {','.join(map(str, dims))} does not match input {name!r} "
                         f"of shape {want}")
    return [{name: load_image(f, dims, mean, scale, **fit)} for f in files]
