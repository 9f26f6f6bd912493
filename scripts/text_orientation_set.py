"""Write a small real-photo dataset for ``ppocr_mobile_v2_cls_48x192.onnx`` (text orientation).

Crops of the printed text lines of scikit-image's scanned book page
(``skimage.data.page``), each saved upright in ``OUT/0/`` and turned by 180
degrees in ``OUT/180/``: the two
classes of PaddleOCR's direction classifier ("0", "180", in that order).
Used to evaluate the classifier with ``opendla eval``::

    python scripts/text_orientation_set.py build/orientation
    opendla eval ../shared/models/ppocr_mobile_v2_cls_48x192.onnx --data build/orientation \\
        --calib cls.json -w 127.5 -s 0.007843

Needs scikit-image (a dev extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image


def text_lines(image: np.ndarray, min_height: int = 7, max_height: int = 30
               ) -> list[tuple[int, int]]:
    """Row bands ``(top, bottom)`` holding one line of dark text each.

    Ink is a pixel darker than its row band's local background (a 31-pixel
    median across the row) by more than 40 levels, which copes with the
    uneven lighting of a photographed page; a text line is a run of rows
    with ink in more than 2% of their pixels.
    """
    from scipy.ndimage import median_filter

    background = median_filter(image.astype(np.float64), size=(1, 31))
    ink = (background - image) > 40
    rows = ink.mean(axis=1) > 0.02
    bands, top = [], None
    for y, on in enumerate([*rows, False]):
        if on and top is None:
            top = y
        elif not on and top is not None:
            if min_height <= y - top <= max_height:
                bands.append((top, y))
            top = None
    return bands


def text_crops(image: np.ndarray, margin: int = 3) -> list[np.ndarray]:
    """Crops of single text lines at the classifier's 1:4 aspect ratio: each line band
    (with ``margin`` rows above and below) cut into windows ``4 * height`` wide, half
    overlapping, keeping the windows that hold ink."""
    crops = []
    for top, bottom in text_lines(image):
        top, bottom = max(0, top - margin), min(image.shape[0], bottom + margin)
        height = bottom - top
        width = 4 * height
        for x in range(0, image.shape[1] - width + 1, width // 2):
            win = image[top:bottom, x:x + width]
            if win.std() > 25:
                crops.append(win)
    return crops


def main() -> None:
    import skimage.data

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="output folder (OUT/0, OUT/180)")
    args = parser.parse_args()
    page = skimage.data.page()          # an 8-bit grey scan of a book page
    crops = [c for margin in (2, 4, 6) for c in text_crops(page, margin)]
    for label in ("0", "180"):
        (args.out / label).mkdir(parents=True, exist_ok=True)
    for i, crop in enumerate(crops):
        Image.fromarray(crop).save(args.out / "0" / f"{i:03d}.png")
        Image.fromarray(np.ascontiguousarray(crop[::-1, ::-1])).save(
            args.out / "180" / f"{i:03d}.png")
    print(f"{len(crops)} crops x 2 orientations -> {args.out}")


if __name__ == "__main__":
    main()
