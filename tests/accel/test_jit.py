"""numba's cache goes to a folder of the user's, never into the package (issue 46)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import accel

PACKAGE = Path(accel.__file__).resolve().parent

# compiles (or loads) and runs the packing loop, then names numba's cache folder
_RUN = """
import numpy as np
from accel.config import get_preset
from accel.layout import cube_layout, pack_feature
pack_feature(np.zeros((3, 4, 5), np.int8), cube_layout(get_preset("nv_small"), 3, 4, 5))
import accel.jit, numba.core.config as c
print(c.CACHE_DIR)
"""


def _cached(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.suffix in (".nbi", ".nbc")}


def _run(env: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | env
    out = subprocess.run([sys.executable, "-c", _RUN], env=env, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def test_the_compiled_loops_are_cached_in_the_users_cache_folder(tmp_path):
    before = _cached(PACKAGE)
    printed = _run({"XDG_CACHE_HOME": str(tmp_path)})
    assert Path(printed) == tmp_path / "opendla" / "numba"
    assert any(p.suffix == ".nbi" for p in _cached(tmp_path / "opendla" / "numba"))
    assert _cached(PACKAGE) == before


def test_a_numba_cache_dir_of_the_users_own_is_kept(tmp_path):
    assert Path(_run({"NUMBA_CACHE_DIR": str(tmp_path / "mine")})) == tmp_path / "mine"
    assert _cached(tmp_path / "mine")
