"""Min-max calibration: run the fp32 graph on sample inputs and record each tensor's range."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized

import numpy as np

from tengine_host.interpreter import interpret
from tengine_host.ir import Graph
from tengine_host.quant.progress import ProgressBar
from tengine_host.quant.table import QuantTable, entry


def calibrate(graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], *,
              progress: bool = True) -> QuantTable:
    """Per-tensor symmetric scales from the min/max over every sample.

    Parameters
    ----------
    graph : Graph
        The graph as it will be executed (after passes: fused activations
        change which tensors exist).
    samples : iterable of mappings
        Each maps every graph input name to an array of its shape.
    progress : bool
        Draw a progress bar on stderr.

    Returns
    -------
    QuantTable
        An entry for every graph input and every node output:
        ``scale = max(|min|, |max|) / 127``.
    """
    samples = samples if isinstance(samples, Sized) else list(samples)
    if len(samples) == 0:
        raise ValueError("calibration needs at least one input sample")
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    with ProgressBar(len(samples), "calibrate", enabled=progress) as bar:
        for feeds in samples:
            values = interpret(graph, feeds, keep_all=True)
            for name, v in values.items():
                if graph.is_constant(name) or not np.issubdtype(np.asarray(v).dtype, np.floating):
                    continue
                lo[name] = min(lo.get(name, np.inf), float(np.min(v)))
                hi[name] = max(hi.get(name, -np.inf), float(np.max(v)))
            bar.update()
    return {name: entry(lo[name], hi[name]) for name in lo}
