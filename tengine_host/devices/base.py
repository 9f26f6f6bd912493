"""The protocol every execution device implements (Tengine's device interface)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from accel.ir import Graph, Node
from tengine_host.quant.table import QuantTable


@runtime_checkable
class Device(Protocol):
    """A backend that runs subgraphs.

    The lifecycle mirrors Tengine: ``supports`` is asked per node by the
    partitioner; ``prerun`` prepares one subgraph once (compile, quantize
    weights); ``run`` executes it per inference; ``postrun`` releases it.
    """

    name: str

    def supports(self, node: Node, graph: Graph) -> tuple[bool, str]:
        """``(True, "")`` when this device runs ``node``; else ``(False, reason)``."""
        ...

    def prerun(self, subgraph: Graph, quant_table: QuantTable | None) -> Any:
        """Prepare ``subgraph``; returns an opaque handle for :meth:`run`."""
        ...

    def run(self, prepared: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Execute; ``inputs`` / result are keyed by the subgraph's input / output names."""
        ...

    def postrun(self, prepared: Any) -> None:
        """Release what :meth:`prerun` allocated."""
        ...
