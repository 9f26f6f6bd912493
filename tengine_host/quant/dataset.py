"""Calibration inputs from ``.npy`` / ``.npz`` files or a folder of images."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tengine_host.ir import Graph

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
    if path.suffix == ".npy":
        if len(graph.inputs) != 1:
            raise ValueError(f"{path.name}: a .npy file feeds one input, the model has "
                             f"{graph.inputs}; use an .npz with arrays named after them")
        arrays = {graph.inputs[0]: np.load(path)}
    elif path.suffix == ".npz":
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in npz.files}
    else:
        raise ValueError(f"calibration file {str(path)!r} must be .npy or .npz")
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


def load_image(path: str | Path, dims: tuple[int, int, int], mean: tuple[float, ...],
               scale: tuple[float, ...]) -> np.ndarray:
    """One image as float32 [1, C, H, W]: resized, ``(pixel - mean[c]) * scale[c]``."""
    from PIL import Image  # only the image path needs Pillow

    c, h, w = dims
    if c not in (1, 3):
        raise ValueError(f"image channels must be 1 or 3, got {c}")
    with Image.open(path) as img:
        img = img.convert("L" if c == 1 else "RGB").resize((w, h), Image.BILINEAR)
        arr = np.asarray(img, dtype=np.float32).reshape(h, w, c).transpose(2, 0, 1)
    m = np.broadcast_to(np.asarray(mean, np.float32), (c,)).reshape(c, 1, 1)
    s = np.broadcast_to(np.asarray(scale, np.float32), (c,)).reshape(c, 1, 1)
    return ((arr - m) * s)[None]


def load_images(folder: str | Path, graph: Graph, dims: tuple[int, int, int],
                mean: tuple[float, ...] = (0.0,), scale: tuple[float, ...] = (1.0,)
                ) -> list[dict[str, np.ndarray]]:
    """One sample per image file in ``folder`` (sorted), for a single-input model."""
    folder = Path(folder)
    if len(graph.inputs) != 1:
        raise ValueError(f"an image folder feeds one input, the model has {graph.inputs}")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise ValueError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {str(folder)!r}")
    name = graph.inputs[0]
    want = graph.tensors[name].shape
    if want[1:] != tuple(dims):
        raise ValueError(f"-g {dims} does not match input {name!r} of shape {want}")
    return [{name: load_image(f, dims, mean, scale)} for f in files]
