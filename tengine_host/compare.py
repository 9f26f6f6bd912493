"""Layer-by-layer comparison of the three paths of a model on the DLA.

For every tensor the DLA computes, three values of the same sample:

* **fp32**: the whole graph interpreted in float32 (the model as trained);
* **int8 reference**: the same partition with the DLA subgraphs through the
  op table's plain-numpy int8 references (:func:`tengine_host.verify.run_both`),
  dequantized with the tensor's scale and zero point;
* **DLA**: the value the simulated hardware left in memory, dequantized the same way.

The reference and the DLA must agree byte for byte (the bit-exact contract);
both are compared with fp32 by cosine similarity and maximum absolute error,
which is what quantization costs layer by layer.  Statistics accumulate over
samples: the cosine is over all samples' values together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tengine_host.executor import Executor
from tengine_host.interpreter import interpret
from tengine_host.quant.fidelity import ErrorStats  # running cosine (and SQNR)
from tengine_host.verify import run_both


@dataclass
class LayerComparison:
    """One DLA tensor's three-way comparison, accumulated over samples."""

    tensor: str
    node: str
    op_type: str
    subgraph: int
    shape: tuple[int, ...]
    samples: int = 0
    differing: int = 0                 # int8 values where the DLA != the reference
    total: int = 0
    max_abs_ref: float = 0.0           # |int8 reference - fp32|
    max_abs_dla: float = 0.0           # |DLA - fp32|
    max_code_diff: int = 0             # |DLA - reference| in int8 steps
    _cos_ref: ErrorStats = field(default_factory=ErrorStats, repr=False)
    _cos_dla: ErrorStats = field(default_factory=ErrorStats, repr=False)

    @property
    def bit_exact(self) -> bool:
        return self.samples > 0 and self.differing == 0

    @property
    def cosine_ref(self) -> float:
        return self._cos_ref.cosine

    @property
    def cosine_dla(self) -> float:
        return self._cos_dla.cosine

    def add(self, fp32: np.ndarray, reference: np.ndarray, device: np.ndarray | None,
            scale: float, zero_point: int = 0) -> None:
        """One sample: int8 ``reference``/``device`` against ``fp32`` of the same shape (the
        codes stand for ``(code - zero_point) * scale``)."""
        self.samples += 1
        self.total += reference.size
        ref_real = (reference.astype(np.float64) - zero_point) * scale
        self._cos_ref.add(ref_real, fp32)
        self.max_abs_ref = max(self.max_abs_ref, float(np.max(np.abs(ref_real - fp32))))
        if device is None or device.shape != reference.shape:
            self.differing += reference.size
            self.max_code_diff = max(self.max_code_diff, 256)
            self._cos_dla.add(np.zeros_like(fp32), fp32)
            self.max_abs_dla = max(self.max_abs_dla, float(np.max(np.abs(fp32))))
            return
        codes = np.abs(device.astype(np.int64) - reference.astype(np.int64))
        self.differing += int(np.count_nonzero(codes))
        self.max_code_diff = max(self.max_code_diff, int(codes.max(initial=0)))
        dla_real = (device.astype(np.float64) - zero_point) * scale
        self._cos_dla.add(dla_real, fp32)
        self.max_abs_dla = max(self.max_abs_dla, float(np.max(np.abs(dla_real - fp32))))

    def as_dict(self) -> dict:
        return {"tensor": self.tensor, "node": self.node, "op_type": self.op_type,
                "subgraph": self.subgraph, "shape": list(self.shape), "samples": self.samples,
                "cosine_int8_ref": self.cosine_ref, "cosine_dla": self.cosine_dla,
                "max_abs_int8_ref": self.max_abs_ref, "max_abs_dla": self.max_abs_dla,
                "bit_exact": self.bit_exact, "differing": self.differing, "total": self.total,
                "max_code_diff": self.max_code_diff}


@dataclass
class OutputComparison:
    """A model output on the int8 reference path and the DLA path against fp32."""

    name: str
    samples: int = 0
    top1_ref: int = 0        # samples whose arg-max equals fp32's (2-D outputs)
    top1_dla: int = 0
    _cos_ref: ErrorStats = field(default_factory=ErrorStats, repr=False)
    _cos_dla: ErrorStats = field(default_factory=ErrorStats, repr=False)

    def add(self, fp32: np.ndarray, ref: np.ndarray, dla: np.ndarray) -> None:
        self.samples += 1
        self._cos_ref.add(ref, fp32)
        self._cos_dla.add(dla, fp32)
        if fp32.ndim == 2:
            self.top1_ref += int(np.argmax(ref) == np.argmax(fp32))
            self.top1_dla += int(np.argmax(dla) == np.argmax(fp32))

    def as_dict(self) -> dict:
        return {"name": self.name, "samples": self.samples,
                "cosine_int8_ref": self._cos_ref.cosine, "cosine_dla": self._cos_dla.cosine,
                "top1_agree_int8_ref": self.top1_ref, "top1_agree_dla": self.top1_dla}


@dataclass
class Comparison:
    """Every DLA tensor (in execution order) and every model output, over ``samples``."""

    layers: dict[str, LayerComparison] = field(default_factory=dict)
    outputs: dict[str, OutputComparison] = field(default_factory=dict)
    samples: int = 0

    @property
    def bit_exact(self) -> bool:
        return bool(self.layers) and all(c.bit_exact for c in self.layers.values())

    @property
    def first_divergent(self) -> LayerComparison | None:
        """The first tensor where the DLA and the int8 reference differ: where the
        hardware (or the compiler) went wrong; later differences may follow from it."""
        return next((c for c in self.layers.values() if not c.bit_exact), None)

    def as_dict(self) -> dict:
        first = self.first_divergent
        return {"samples": self.samples, "bit_exact": self.bit_exact,
                "first_divergent": first.tensor if first else None,
                "layers": [c.as_dict() for c in self.layers.values()],
                "outputs": [o.as_dict() for o in self.outputs.values()]}


def compare_run(ex: Executor, feeds: Mapping[str, np.ndarray],
                result: Comparison | None = None) -> Comparison:
    """Add one batch-1 sample to ``result`` (``ex`` prepared with an nvdla device created
    with ``capture=True`` and the CPU)."""
    result = result if result is not None else Comparison()
    fp32 = interpret(ex.graph, dict(feeds), keep_all=True)
    dla_out, ref_out, values = run_both(ex, feeds)
    result.samples += 1
    for v in values:
        want = np.asarray(fp32[v.tensor], dtype=np.float64).reshape(v.reference.shape)
        layer = result.layers.get(v.tensor)
        if layer is None:
            layer = result.layers[v.tensor] = LayerComparison(
                v.tensor, v.node, v.op_type, v.subgraph, tuple(v.reference.shape))
        layer.add(want, v.reference, v.device, v.scale, v.zero_point)
    for name in ex.graph.outputs:
        out = result.outputs.setdefault(name, OutputComparison(name))
        out.add(np.asarray(fp32[name], np.float64), np.asarray(ref_out[name], np.float64),
                np.asarray(dla_out[name], np.float64))
    return result
