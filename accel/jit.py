"""numba's ``njit``, its on-disk cache in a folder of the user's, never in the package.

The compiled loops of the speed layer and the layout (``@njit(cache=True)``) are
kept between processes, so only the first run on a machine compiles them.  numba
writes that cache beside the source by default: into the installed package, which
may be read-only, shared between users, or a checkout the cache then dirties.
Importing this module first points numba at ``$NUMBA_CACHE_DIR`` when the user set
it, else at ``$XDG_CACHE_HOME/opendla/numba`` (``~/.cache/opendla/numba``).

numba keys a cached loop by the file that defines it: a loop that inlines a helper
from another module (``fused._post`` the rounding of :mod:`accel.arith` and the table
lookup of ``fast.lut_y``) keeps its old code after that helper is edited.  Whoever
edits such a helper clears the folder (an installed release never changes them).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where numba keeps the compiled loops (see the module docstring)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "opendla" / "numba"


os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir()))

from numba.core import config as _config  # noqa: E402  (reads NUMBA_CACHE_DIR)

if not _config.CACHE_DIR:          # numba was imported before us: tell it now
    _config.CACHE_DIR = str(cache_dir())

from numba import njit  # noqa: E402

__all__ = ["cache_dir", "njit"]
