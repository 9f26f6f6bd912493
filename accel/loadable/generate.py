"""Regenerate the Python flatbuffers bindings of ``loadable.fbs``.

``flatc --python`` emits absolute imports such as ``from nvdla.loadable.Blob
import Blob``, which only resolve when ``nvdla`` is a top-level package. We ship
the bindings inside ``accel.loadable`` instead, so the imports are rewritten to
``accel.loadable.nvdla.loadable``. Run ``python -m accel.loadable.generate``
after editing the schema; a test checks the committed files match.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = HERE / "loadable.fbs"
PACKAGE = "accel.loadable"


def generate(out_dir: Path, flatc: str = "flatc") -> list[Path]:
    """Run ``flatc --python`` on the schema into ``out_dir`` and fix the imports.

    Parameters
    ----------
    out_dir
        Directory that receives the ``nvdla/loadable/*.py`` tree.
    flatc
        Name or path of the flatbuffers compiler.

    Returns
    -------
    list of Path
        The generated Python files, sorted.
    """
    exe = shutil.which(flatc)
    if exe is None:
        raise FileNotFoundError(f"flatbuffers compiler {flatc!r} not found on PATH")
    subprocess.run([exe, "--python", "-o", str(out_dir), str(SCHEMA)], check=True)
    files = sorted(Path(out_dir, "nvdla").rglob("*.py"))
    for path in files:
        text = path.read_text()
        text = re.sub(r"\bfrom nvdla\.loadable\.", f"from {PACKAGE}.nvdla.loadable.", text)
        path.write_text(text)
    return files


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        target = HERE / "nvdla"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(tmp, "nvdla"), target)
    print(f"regenerated {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
