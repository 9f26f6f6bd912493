"""What the cmodel reports of each hardware operation it runs: :class:`OpRecord`.

Every unit's execute step returns one record (``Dla.stats`` collects them in
order, a backend's ``stats`` hands them to the runtime): the unit, its cycle
estimate (:mod:`accel.cmod.perf`), the operand shape, and the unit-specific
details a reader may want (a convolution's MAC atoms and CBUF use, a pool's
method and width splits, a lookup table's hit counts ...).  A convolution's
SDP runs on the fly in the same pipeline and is kept as its ``sdp``.

Records are read, not modified (details a backend adds aside): the runs of one
operation share the parts of their records that do not change from run to run,
so a replayed network allocates few objects per operation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class OpRecord:
    """One operation of one unit, as the cmodel ran it."""

    unit: str                                  # CONV, SDP, PDP, CDP, BDMA or RUBIK
    cycles: int                                # throughput estimate
    shape: Any = None                          # operand shape(s), unit-specific
    details: dict[str, Any] = field(default_factory=dict)
    sdp: OpRecord | None = None                # a convolution's fused SDP
    note: str = ""                             # a behaviour worth telling (kept CBUF data...)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able view: unit, cycles, shape, the details, ``sdp`` nested."""
        out: dict[str, Any] = {"unit": self.unit, "cycles": self.cycles, "shape": self.shape,
                               **self.details}
        if self.note:
            out["note"] = self.note
        if self.sdp is not None:
            out["sdp"] = self.sdp.as_dict()
        return json.loads(json.dumps(out, default=str))
