"""A dependency-free progress bar on stderr."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``with ProgressBar(total, "calibrate") as bar: bar.update()`` draws
    ``calibrate [#######.......] 12/30 0.4s`` on one line of ``stream``."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, width: int = 30,
                 enabled: bool = True) -> None:
        self.total, self.label, self.width = max(total, 1), label, width
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0
        self.start = time.perf_counter()
        self._last = -1.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        # Redraw at most ten times a second, and always for the last step.
        if self.enabled and (now - self._last >= 0.1 or self.done >= self.total):
            self._last = now
            fill = self.width * min(self.done, self.total) // self.total
            elapsed = now - self.start
            self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (self.width - fill)}] "
                              f"{self.done}/{self.total} {elapsed:.1f}s")
            self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
