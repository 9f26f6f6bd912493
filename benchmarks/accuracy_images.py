"""Real images for the accuracy benchmark, built deterministically from scikit-image's data.

Every function returns 8-bit RGB ``(H, W, 3)`` arrays.  The sources are the
photos bundled with scikit-image (no download): the astronaut and the
cameraman for people, the 100 faces of its LFW subset (25 x 25 grey, Labeled
Faces in the Wild), the scanned book page ``page()`` and the photographed
handwriting ``text()`` for documents, and its other photos (coffee, a cat,
a rocket, a motorcycle, ...) as scenes and figures.  Where a model needs a
composition the photos do not offer (several small faces in one scene, a
page with a heading, paragraphs and a figure), the pieces are pasted at
places drawn from a seeded generator, so a run is reproducible.
scikit-image (a dev extra) is imported when the first photo is needed.
"""

from __future__ import annotations

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

#: prose for rendered text (the benchmark's own words: no outside text to license)
PROSE = (
    "An accelerator for deep learning spends most of its time multiplying small integers. "
    "Each layer reads a cube of features, convolves it with its weights, adds a bias and "
    "passes the sums through a converter that scales them back to eight bits. The scale of "
    "every tensor is chosen once, from a handful of calibration images, and from then on the "
    "hardware never sees a floating point number. When the chosen range is too wide, small "
    "values vanish into the same code; when it is too narrow, large values are clipped. "
    "Both errors grow as they pass through the network, and a detector may lose a box or "
    "find one that is not there. This report measures how often that happens on real "
    "pictures: faces, printed pages, handwriting and everyday scenes, each given to the "
    "model that was trained to read it. The answers of the floating point model are taken "
    "as the truth, and every integer method is judged by how closely it follows them. "
    "Tables, headings, captions and figures are laid out the way a journal page would be, "
    "so that the layout model sees the regions it was built to separate."
)

HEADINGS = ("Quantization of detection networks", "Results on the test images",
            "Related work", "Calibration and its pitfalls", "Method", "Conclusion",
            "Appendix A: arithmetic", "Experimental setup")


def rgb(image: np.ndarray) -> np.ndarray:
    """``image`` as 8-bit RGB: grey repeated, alpha dropped, floats in [0, 1] and bools scaled."""
    a = np.asarray(image)
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    elif np.issubdtype(a.dtype, np.floating):
        a = np.clip(np.rint(a * 255), 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = np.stack([a] * 3, -1)
    return np.ascontiguousarray(a[..., :3])


def resize(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Bilinear resize (PIL) of an RGB or grey uint8 image to ``width`` x ``height``."""
    return np.asarray(Image.fromarray(image).resize((width, height), Image.BILINEAR))


@functools.cache
def photo(name: str) -> np.ndarray:
    """A scikit-image sample photo by name, as RGB (``"motorcycle"``: the stereo pair's left)."""
    import skimage.data

    image = rgb(skimage.data.stereo_motorcycle()[0] if name == "motorcycle"
                else getattr(skimage.data, name)())
    image.flags.writeable = False           # shared by every caller: paste into copies
    return image


@functools.cache
def lfw_faces() -> np.ndarray:
    """The 100 faces of scikit-image's LFW subset, ``(100, 25, 25)`` uint8 grey (the other
    100 images of the subset are not faces)."""
    import skimage.data

    faces = np.clip(np.rint(skimage.data.lfw_subset()[:100] * 255), 0, 255).astype(np.uint8)
    faces.flags.writeable = False
    return faces


def framed_face(face: np.ndarray, size: int, margin: float = 0.25) -> np.ndarray:
    """A tightly cropped face upscaled to ``size`` x ``size`` with ``margin`` of its side added
    around it by repeating the border, as a face tracker's region of interest has."""
    pad = int(round(face.shape[0] * margin))
    framed = np.pad(face, pad, mode="edge")
    return rgb(resize(framed, size, size))


def paste(canvas: np.ndarray, patch: np.ndarray, top: int, left: int) -> None:
    """Write ``patch`` (RGB) into ``canvas`` in place with its top-left corner at ``top, left``."""
    h, w = patch.shape[:2]
    canvas[top:top + h, left:left + w] = patch


def face_scene(background: np.ndarray, faces: np.ndarray, sizes: tuple[int, int],
               rng: np.random.Generator) -> np.ndarray:
    """``background`` with each of ``faces`` upscaled to a side drawn from ``sizes`` (inclusive)
    and pasted at a random place where it does not overlap an earlier face."""
    scene = background.copy()
    h, w = scene.shape[:2]
    placed: list[tuple[int, int, int]] = []
    for face in faces:
        for _ in range(100):
            side = int(rng.integers(sizes[0], sizes[1] + 1))
            top, left = int(rng.integers(0, h - side)), int(rng.integers(0, w - side))
            if all(top + side <= t or t + s <= top or left + side <= x or x + s <= left
                   for t, x, s in placed):
                paste(scene, framed_face(face, side, margin=0.1), top, left)
                placed.append((top, left, side))
                break
    return scene


def mosaic(images: list[np.ndarray], cols: int, cell: int) -> np.ndarray:
    """Square ``cell``-pixel tiles of ``images``, ``cols`` to a row, rows filled in order."""
    rows = -(-len(images) // cols)
    out = np.zeros((rows * cell, cols * cell, 3), np.uint8)
    for i, img in enumerate(images):
        paste(out, rgb(resize(rgb(img), cell, cell)), (i // cols) * cell, (i % cols) * cell)
    return out


def render_text(text: str, width: int, size: int, *, ink: int = 20, paper: int = 250,
                line_gap: float = 1.35) -> np.ndarray:
    """``text`` typeset in Pillow's built-in font at ``size`` px, wrapped word by word to
    ``width`` pixels, dark on light, as a grey image exactly ``width`` wide."""
    font = ImageFont.load_default(size=size)
    lines: list[str] = []
    for word in text.split():
        if lines and font.getlength(f"{lines[-1]} {word}") <= width - 4:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    step = int(round(size * line_gap))
    img = Image.new("L", (width, step * len(lines) + size // 2), paper)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((2, i * step), line, fill=ink, font=font)
    return np.asarray(img)


def prose(rng: np.random.Generator, words: int) -> str:
    """``words`` consecutive words of :data:`PROSE` (read round), from a random word on."""
    vocabulary = PROSE.split()
    start = int(rng.integers(len(vocabulary)))
    return " ".join((vocabulary[start:] + vocabulary[:start])[:words])


def render_table(rng: np.random.Generator, rows: int, cols: int, width: int,
                 size: int = 14) -> np.ndarray:
    """A ruled table of ``rows x cols`` numbers (the first row headings), ``width`` wide, grey."""
    font = ImageFont.load_default(size=size)
    cell_w, cell_h = width // cols, int(size * 1.9)
    img = Image.new("L", (cell_w * cols + 1, cell_h * rows + 1), 250)
    draw = ImageDraw.Draw(img)
    for r in range(rows):
        for c in range(cols):
            text = f"col {c + 1}" if r == 0 else f"{rng.uniform(0, 100):.2f}"
            draw.text((c * cell_w + 6, r * cell_h + size // 3), text, fill=20, font=font)
    for r in range(rows + 1):
        draw.line([(0, r * cell_h), (cell_w * cols, r * cell_h)], fill=40, width=1 + (r < 2))
    for c in range(cols + 1):
        draw.line([(c * cell_w, 0), (c * cell_w, cell_h * rows)], fill=40)
    return np.asarray(img)


def document(rng: np.random.Generator, figures: list[np.ndarray], *,
             paragraphs: list[np.ndarray] = (), height: int = 800, width: int = 608,
             margin: int = 28) -> np.ndarray:
    """A journal-like page: a heading, then paragraphs, figures with captions and tables in
    a random order until the page is full, and a page number at the foot.

    ``figures`` are photos to place (each at most once); ``paragraphs`` are grey text
    images (crops of scanned pages) used in place of rendered prose where given.
    """
    page = np.full((height, width), 250, np.uint8)
    content = width - 2 * margin
    y = margin

    def place(block: np.ndarray, indent: int = 0) -> bool:
        nonlocal y
        h, w = block.shape[:2]
        if y + h > height - 2 * margin:
            return False
        page[y:y + h, margin + indent:margin + indent + w] = block
        y += h + int(rng.integers(12, 24))
        return True

    place(render_text(HEADINGS[int(rng.integers(len(HEADINGS)))], content,
                      int(rng.integers(24, 34))))
    figures, paragraphs = list(figures), list(paragraphs)
    for _ in range(8):
        kind = rng.choice(["text", "text", "figure", "table"])
        if kind == "figure" and figures:
            img = np.asarray(Image.fromarray(figures.pop(0)).convert("L"))
            fw = int(rng.integers(content // 2, content * 3 // 4))
            fh = min(int(fw * img.shape[0] / img.shape[1]), height // 3)
            ok = place(resize(img, fw, fh), (content - fw) // 2)
            ok = ok and place(render_text(f"Figure {int(rng.integers(1, 9))}: "
                                          + prose(rng, 10), content, 13))
        elif kind == "table":
            ok = place(render_text(f"Table {int(rng.integers(1, 9))}: " + prose(rng, 8),
                                   content, 13))
            ok = ok and place(render_table(rng, int(rng.integers(3, 7)), int(rng.integers(3, 6)),
                                           content))
        elif paragraphs and rng.random() < 0.5:
            crop = paragraphs.pop(0)
            ok = place(resize(crop, content, int(crop.shape[0] * content / crop.shape[1])))
        else:
            ok = place(render_text(prose(rng, int(rng.integers(30, 90))), content,
                                   int(rng.integers(13, 18))))
        if not ok:
            break
    foot = render_text(f"- {int(rng.integers(1, 300))} -", 60, 12)
    page[height - margin:height - margin + foot.shape[0], (width - 60) // 2:(width + 60) // 2] \
        = foot[:margin]
    return rgb(page)


# ---- the image sets, each split into calibration and test images ------------------------
#
# The two splits share no image and, where the sources allow, no source: different
# faces, different background photos, different figures; the scanned page ``page()``
# appears only in test sets and the handwriting ``text()`` only in calibration sets.
# Calibration lists come in an order where any first N of them mix their kinds.

SPLITS = ("calibration", "test")
#: photos behind the pasted faces, and photos used as figures on pages
BACKGROUNDS = {"calibration": ("coffee", "chelsea", "grass", "brick"),
               "test": ("rocket", "motorcycle", "gravel", "clock", "hubble_deep_field",
                        "immunohistochemistry")}
FIGURES = {"calibration": ("coffee", "chelsea", "astronaut", "coins", "colorwheel", "moon"),
           "test": ("camera", "rocket", "motorcycle", "clock", "immunohistochemistry",
                    "hubble_deep_field", "retina", "cell")}
#: LFW faces of each split (the subset's first 100 images are faces)
FACES = {"calibration": slice(0, 50), "test": slice(50, 100)}
#: face side as a share of the scene's shorter side: small, medium, large
FACE_SIZES = ((0.10, 0.18), (0.18, 0.30), (0.28, 0.42))


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"image split {split!r} not in {', '.join(SPLITS)}")


def _interleave(*groups: list[np.ndarray]) -> list[np.ndarray]:
    """One image of each group in turn, so that every prefix mixes the groups."""
    out = []
    for i in range(max(map(len, groups))):
        out += [g[i] for g in groups if i < len(g)]
    return out


def face_crops(split: str) -> list[np.ndarray]:
    """Face regions for a landmark model: LFW faces with a quarter of a face's margin, and
    one real photo's face (the astronaut's for calibration, the cameraman's for test)."""
    _check_split(split)
    whole = (photo("astronaut")[0:220, 140:330] if split == "calibration"
             else photo("camera")[50:210, 150:310])
    return [whole] + [framed_face(f, 192) for f in lfw_faces()[FACES[split]]]


def people_scenes(split: str) -> list[np.ndarray]:
    """People for face and person detectors: a real portrait (the astronaut for calibration,
    the cameraman for test), scenes with two to five LFW faces pasted at three size ranges,
    grids of faces, and (test only) two photos with nobody in them, where anything found
    is a false alarm."""
    _check_split(split)
    rng = np.random.default_rng(SPLITS.index(split) + 10)
    faces = lfw_faces()[FACES[split]]
    scenes = []
    for name in BACKGROUNDS[split]:
        bg = photo(name)
        for lo, hi in FACE_SIZES[:2] if split == "test" else FACE_SIZES:
            side = min(bg.shape[:2])
            pick = faces[rng.choice(len(faces), int(rng.integers(2, 6)), replace=False)]
            scenes.append(face_scene(bg, pick, (int(lo * side), int(hi * side)), rng))
    grids = [mosaic(list(faces[rng.choice(len(faces), cols * cols, replace=False)]), cols,
                    256 // cols) for cols in (2, 3, 4)]
    if split == "calibration":
        return _interleave([photo("astronaut")], scenes, grids)
    return [photo("camera"), *scenes, *grids, photo("rocket"), photo("motorcycle")]


def documents(split: str, count: int) -> list[np.ndarray]:
    """``count`` journal-like pages (:func:`document`) with the split's figures; test pages
    also carry crops of the scanned page's paragraph lines."""
    _check_split(split)
    rng = np.random.default_rng(SPLITS.index(split) + 20)
    figures = [photo(n) for n in FIGURES[split]]
    paragraphs = []
    if split == "test":     # the scanned page's paragraph, from its first to its last line
        from scripts.text_orientation_set import text_lines

        page = photo("page")[..., 0]
        bands = text_lines(page)
        paragraphs = [page[bands[1][0] - 4:bands[-2][1] + 4]]
    pages = []
    for i in range(count):
        start = i % len(figures)
        pages.append(document(rng, (figures[start:] + figures[:start])[:3],
                              paragraphs=paragraphs))
    return pages


def text_pictures(split: str) -> list[np.ndarray]:
    """Pictures of text for a text detector: the scanned page (test) or the photographed
    handwriting (calibration), whole and in halves, rendered paragraphs, and windows of
    the split's documents at print scale."""
    _check_split(split)
    rng = np.random.default_rng(SPLITS.index(split) + 30)
    scan = photo("page") if split == "test" else photo("text")
    h, w = scan.shape[:2]
    scans = [scan, scan[:, : w // 2], scan[:, w // 2:], scan[: h * 2 // 3]]
    rendered = [rgb(render_text(prose(rng, int(rng.integers(25, 60))), 320,
                                int(rng.integers(12, 26)))) for _ in range(6)]
    windows = []
    for page in documents(split, 6):
        side = int(rng.integers(300, 420))
        top = int(rng.integers(0, page.shape[0] - side))
        windows.append(page[top:top + side, : min(side, page.shape[1])])
    return _interleave(scans, rendered, windows)


def text_line_pictures(split: str) -> list[np.ndarray]:
    """Single text lines at the 1:4 aspect of an orientation classifier, upright and turned
    by 180 degrees in turn: crops of the scanned page's lines (test, as
    ``scripts/text_orientation_set.py`` cuts them) or lines typeset at random sizes
    (calibration)."""
    _check_split(split)
    if split == "test":
        from scripts.text_orientation_set import text_crops

        crops = [rgb(c) for c in text_crops(photo("page")[..., 0], margin=4)]
    else:
        rng = np.random.default_rng(40)
        crops = []
        for _ in range(8):
            size = int(rng.integers(16, 31))
            height = int(1.45 * size)
            crops.append(rgb(render_text(prose(rng, 14), 4 * height, size)[:height]))
    return _interleave(crops, [np.ascontiguousarray(c[::-1, ::-1]) for c in crops])
