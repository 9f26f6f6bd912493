"""Progress bars for long loops (calibration, evaluation, comparison).

A thin front for :mod:`tqdm` so every command draws the same bar on stderr,
and only when stderr is a terminal: in CI logs and pipes it stays quiet
rather than filling the log with carriage returns.
"""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm


def progress_bar(total: int, label: str, *, enabled: bool = True,
                 stream: TextIO | None = None) -> tqdm:
    """``with progress_bar(n, "calibrate") as bar: bar.update()``.

    ``enabled=False`` (a command's ``--no-progress``) never draws; otherwise
    the bar is drawn only when ``stream`` (stderr by default) is a terminal.
    """
    return tqdm(total=total, desc=label, file=stream if stream is not None else sys.stderr,
                disable=None if enabled else True, unit="sample", dynamic_ncols=True,
                leave=False)
