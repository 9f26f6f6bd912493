"""The cmodel's speed layer: the same bytes as the plain model, sooner.

Everything here is optional to the model's meaning: :class:`accel.cmod.dla.Dla`
with ``fast=False`` runs none of it.  :class:`FastPaths` (:mod:`.paths`) is the one
seam a ``Dla`` calls; behind it are the integer GEMM engine (:mod:`.gemm`), the
depthwise loops (:mod:`.depthwise`), the compiled CACC/SDP pass (:mod:`.fused`),
learned replays of firmware runs (:mod:`.replay`) and batches of independent
convolutions within them (:mod:`.batch`); every cache is a
:class:`~.cache.BoundedCache`.
"""

from __future__ import annotations

from accel.cmod.fast.paths import FastPaths

__all__ = ["FastPaths"]
