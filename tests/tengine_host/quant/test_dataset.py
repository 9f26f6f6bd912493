from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from PIL import Image

from tengine_host.frontend import load_onnx
from tengine_host.quant.dataset import load_arrays, load_images


@pytest.fixture
def graph():
    g = helper.make_graph([helper.make_node("Relu", ["img"], ["y"])], "g",
                          [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 1, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


def test_npz_rows_npy_stack_and_errors(graph, tmp_path):
    rows = np.arange(12, dtype=np.float32).reshape(3, 1, 2, 2)
    np.savez(tmp_path / "c.npz", img=rows)
    samples = load_arrays(tmp_path / "c.npz", graph)
    assert len(samples) == 3 and samples[2]["img"].shape == (1, 1, 2, 2)
    assert samples[2]["img"].ravel().tolist() == [8, 9, 10, 11]
    np.save(tmp_path / "c.npy", rows[:, None])  # [S, 1, 1, 2, 2]: a stack of whole inputs
    assert len(load_arrays(tmp_path / "c.npy", graph)) == 3
    np.savez(tmp_path / "bad.npz", other=rows)
    with pytest.raises(ValueError, match=r"missing model inputs \['img'\]"):
        load_arrays(tmp_path / "bad.npz", graph)


def test_image_folder_with_mean_and_scale(graph, tmp_path):
    Image.fromarray(np.array([[0, 255], [51, 102]], np.uint8), "L").save(tmp_path / "a.png")
    (tmp_path / "notes.txt").write_text("ignored")
    (s,) = load_images(tmp_path, graph, (1, 2, 2), mean=(51.0,), scale=(0.01,))
    # (pixel - 51) * 0.01 for pixels 0, 255, 51, 102
    np.testing.assert_allclose(s["img"].ravel(), [-0.51, 2.04, 0.0, 0.51], rtol=1e-6)
    with pytest.raises(ValueError, match="does not match input"):
        load_images(tmp_path, graph, (1, 3, 3))


def _rgb_image(path):
    # 4 wide, 2 high: R = 10 * column, G = 100, B = 200
    arr = np.zeros((2, 4, 3), np.uint8)
    arr[..., 0] = np.arange(4) * 10
    arr[..., 1], arr[..., 2] = 100, 200
    Image.fromarray(arr, "RGB").save(path)
    return path


def test_center_crop_swap_rb_and_letterbox(tmp_path):
    from tengine_host.quant.dataset import load_image

    p = _rgb_image(tmp_path / "a.png")
    # center crop to 2x2: the shorter side (2) already fits, columns 1..2 remain
    x = load_image(p, (3, 2, 2), (0.0,), (1.0,), center_crop=True)
    assert x.shape == (1, 3, 2, 2)
    assert x[0, 0].tolist() == [[10, 20], [10, 20]] and x[0, 2].max() == 200
    # swap R and B: channel 0 is now blue
    x = load_image(p, (3, 2, 2), (0.0,), (1.0,), center_crop=True, swap_rb=True)
    assert x[0, 0].min() == 200 and x[0, 2].tolist() == [[10, 20], [10, 20]]
    # letterbox into 4x4: the 4x2 image sits in rows 1..2; padding is 0 after normalization
    x = load_image(p, (3, 4, 4), (5.0,), (0.5,), letterbox=True)
    assert x[0, 1, [0, 3]].tolist() == [[0.0] * 4] * 2
    assert x[0, 1, 1:3].tolist() == [[47.5] * 4] * 2          # (100 - 5) * 0.5
    assert x[0, 0, 1].tolist() == [-2.5, 2.5, 7.5, 12.5]       # (10c - 5) * 0.5
    with pytest.raises(ValueError, match="exclude each other"):
        load_image(p, (3, 2, 2), (0.0,), (1.0,), center_crop=True, letterbox=True)


def test_quantize_cli_passes_image_options(tmp_path):
    import json

    from opendla.cli import main

    folder = tmp_path / "imgs"
    folder.mkdir()
    Image.fromarray(np.full((16, 8), 64, np.uint8), "L").save(folder / "a.png")
    g = helper.make_graph([helper.make_node("Relu", ["img"], ["y"])], "g",
                          [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              tmp_path / "m.onnx")
    out = tmp_path / "c.json"
    # letterbox 16x8 into 4x4: a 2x4 band of 64 -> (64 - 32) / 32 = 1; padding 0
    assert main(["quantize", str(tmp_path / "m.onnx"), "-i", str(folder), "-o", str(out),
                 "-g", "1,4,4", "-w", "32", "-s", "0.03125", "-y", "4,4", "-a", "percentile",
                 "--no-progress"]) == 0
    t = json.loads(out.read_text())
    assert (t["img"]["min"], t["img"]["max"]) == (0.0, 1.0)


# ------------------------------------------------------------------ pixel depth and mode
#: an 8x8 grey ramp 0, 4, ..., 252: the values every mode below must reproduce
RAMP = (np.arange(64, dtype=np.uint8) * 4).reshape(8, 8)


def _mode_images(tmp_path) -> dict[str, str]:
    """The ramp written in PIL modes of every depth; each file holds the same values."""
    files = {
        "L": (Image.fromarray(RAMP), "png"),
        "I;16": (Image.fromarray(RAMP.astype(np.uint16) * 257), "png"),    # 255 * 257 = 65535
        "I": (Image.fromarray(RAMP.astype(np.int32) * 257), "tiff"),
        "F": (Image.fromarray(RAMP.astype(np.float32)), "tiff"),
        "LA": (Image.fromarray(RAMP).convert("LA"), "png"),
        "P": (Image.fromarray(RAMP).convert("P"), "png"),
        "RGBA": (Image.fromarray(np.repeat(RAMP[..., None], 3, axis=2)).convert("RGBA"), "png"),
    }
    out = {}
    for mode, (img, ext) in files.items():
        path = tmp_path / f"ramp_{mode.replace(';', '')}.{ext}"
        img.save(path)
        with Image.open(path) as back:      # the file really has that mode
            assert back.mode in (mode, "I;16B", "I;16L", "I"), (mode, back.mode)
        out[mode] = str(path)
    return out


@pytest.mark.parametrize("channels", [1, 3])
def test_images_of_every_depth_load_by_value(tmp_path, channels):
    """A 16-bit PNG was 99.6 % white as RGB (convert clips instead of scaling); every
    mode now gives the ramp's values, grey repeated for an RGB input."""
    from tengine_host.quant.dataset import load_image

    want = np.repeat(RAMP[None].astype(np.float32), channels, axis=0)[None]
    for mode, path in _mode_images(tmp_path).items():
        got = load_image(path, (channels, 8, 8), (0.0,), (1.0,))
        assert got.dtype == np.float32 and got.shape == (1, channels, 8, 8), mode
        np.testing.assert_array_equal(got, want, err_msg=mode)


def test_wide_images_outside_their_range_are_refused(tmp_path):
    from tengine_host.errors import TengineInputError
    from tengine_host.quant.dataset import load_image

    path = tmp_path / "big.tiff"
    Image.fromarray(np.full((8, 8), 70000, np.int32)).save(path)
    with pytest.raises(TengineInputError, match=r"big\.tiff.*\[70000, 70000\].*\[0, 65535\]"):
        load_image(path, (1, 8, 8), (0.0,), (1.0,))


def test_a_zero_scale_is_refused(tmp_path):
    from tengine_host.errors import TengineInputError
    from tengine_host.quant.dataset import load_image

    Image.fromarray(RAMP).save(tmp_path / "a.png")
    with pytest.raises(TengineInputError, match=r"scale 1,0,1: .*nonzero"):
        load_image(tmp_path / "a.png", (3, 8, 8), (0.0,), (1.0, 0.0, 1.0))


def test_unreadable_images_name_the_file_once(tmp_path):
    from tengine_host.errors import TengineInputError
    from tengine_host.quant.dataset import load_image

    with pytest.raises(TengineInputError) as info:
        load_image(tmp_path, (1, 8, 8), (0.0,), (1.0,))
    assert str(info.value).count(str(tmp_path)) == 1 and "directory" in str(info.value)
    (tmp_path / "text.png").write_text("hello")
    with pytest.raises(TengineInputError) as info:
        load_image(tmp_path / "text.png", (1, 8, 8), (0.0,), (1.0,))
    assert str(info.value).count("text.png") == 1 and "not an image" in str(info.value)
