"""The ``nvdla`` device: compiled subgraphs on a simulated NVDLA.

``prerun`` compiles the subgraph (``accel.compiler``) into a loadable and loads
it into a runtime on a backend (the bit-accurate cmodel by default); ``run``
quantizes the fp32 inputs with their calibrated scales, packs them into
NVDLA's feature layout, submits the task (the firmware programs the hardware
register by register), and unpacks and dequantizes the outputs.

With ``capture=True`` each run also records every layer's int8 input and
output as the hardware read and wrote them, with the parameters the compiler
chose, so they can be checked against the independent int8 CPU reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.arith import scale_shift_factorize
from accel.compiler import CompiledSubgraph, ConvLayer, compile_subgraph, layer_quant, supports
from accel.compiler.quantize import ConvQuant
from accel.config import DEFAULT_PRESET, HwConfig, get_preset
from accel.layout import pack_feature, unpack_feature
from accel.runtime.backend import get_backend
from accel.runtime.umd import Runtime
from tengine_host.ir import Graph, Node
from tengine_host.quant.weights import dequantize, quantize_activation


def output_converter(ratio: float) -> tuple[int, int]:
    """``ratio ~= scale / 2**shift`` with an int16 ``scale``: the NVDLA converter factors.

    The ``cpu`` device's int8 element-wise ops use it for their output converter.
    """
    return scale_shift_factorize(ratio)


def quantize_node(node: Node, graph: Graph, quant_table: dict) -> ConvQuant:
    """The NVDLA compiler's integer parameters for one Conv/Gemm node.

    The ``cpu`` device's int8 mode calls this so that the CPU golden applies
    exactly the parameters the accelerator runs with.
    """
    return layer_quant(node, graph, quant_table)


@dataclass
class LayerCapture:
    """One layer of the last run: what the DLA read and wrote, and how."""

    name: str
    x_q: np.ndarray      # int8 [1, C, H, W]
    y_q: np.ndarray      # int8 [1, K, OH, OW]
    layer: ConvLayer


@dataclass
class NvdlaPrepared:
    compiled: CompiledSubgraph
    runtime: Runtime
    captures: list[LayerCapture] = field(default_factory=list)
    cycles: int = 0      # estimated cycles of the last run (cmodel op records)


class NvdlaDevice:
    """Simulated NVDLA.

    Parameters
    ----------
    preset : str
        Hardware configuration (``accel.config.PRESETS``), nv_small by default.
    backend : str
        Runtime backend name (``accel.runtime.backend.BACKENDS``).
    capture : bool
        Record per-layer int8 tensors on every run (see :class:`LayerCapture`).
    """

    name = "nvdla"
    # Loadables are compiled for batch 1: the executor splits larger batches.
    max_batch = 1

    def __init__(self, preset: str | HwConfig = DEFAULT_PRESET, backend: str = "cmod",
                 capture: bool = False) -> None:
        self.cfg = preset if isinstance(preset, HwConfig) else get_preset(preset)
        self.backend_name = backend
        self.capture = capture
        get_backend(backend, self.cfg)  # fail early on an unknown backend name

    def supports(self, node: Node, graph: Graph) -> tuple[bool, str]:
        return supports(node, graph, self.cfg)

    def prerun(self, subgraph: Graph, quant_table: dict | None) -> NvdlaPrepared:
        if quant_table is None:
            raise ValueError("the nvdla device runs int8 and needs a calibration table "
                             "(opendla quantize)")
        compiled = compile_subgraph(subgraph, quant_table, self.cfg)
        runtime = Runtime(self.cfg, get_backend(self.backend_name, self.cfg))
        runtime.load(compiled.loadable)
        return NvdlaPrepared(compiled, runtime)

    def run(self, prepared: NvdlaPrepared, inputs: dict[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
        """One inference of batch 1 (the executor splits larger batches, ``max_batch``).

        Inputs are quantized and outputs dequantized with the host's own
        functions, the ones the CPU int8 path uses, so both paths agree.
        """
        compiled, rt = prepared.compiled, prepared.runtime
        n_stats = len(rt.backend.stats)
        for t in compiled.inputs:
            if t.name not in inputs:
                raise KeyError(f"input {t.name!r} missing (have {', '.join(inputs)})")
            x = np.asarray(inputs[t.name], dtype=np.float32)
            if x.shape != t.host_shape:
                raise ValueError(f"input {t.name!r} has shape {x.shape}; the loadable was "
                                 f"compiled for {t.host_shape}")
            lay = t.layout
            q = quantize_activation(x, t.scale).reshape(lay.channels, lay.height, lay.width)
            rt.bind_input(t.name, pack_feature(q, lay).tobytes())
        rt.submit()
        outs = {t.name: dequantize(unpack_feature(rt.read_output(t.name), t.layout),
                                   t.scale).reshape(t.host_shape)
                for t in compiled.outputs}
        prepared.cycles = sum(int(s.get("cycles", 0)) for s in rt.backend.stats[n_stats:])
        prepared.captures = ([self._capture(prepared, layer) for layer in compiled.plan.layers]
                             if self.capture else [])
        return outs

    def _read_tensor(self, prepared: NvdlaPrepared, name: str) -> np.ndarray:
        compiled, rt = prepared.compiled, prepared.runtime
        t = compiled.plan.tensors[name]
        addr = rt.mem_address[compiled.tensor_memory[name]]
        q = unpack_feature(rt.backend.read_mem(addr, t.layout.size), t.layout)
        return q[None]

    def _capture(self, prepared: NvdlaPrepared, layer: ConvLayer) -> LayerCapture:
        return LayerCapture(layer.name, self._read_tensor(prepared, layer.src),
                            self._read_tensor(prepared, layer.dst), layer)

    def postrun(self, prepared: NvdlaPrepared) -> None:
        prepared.captures.clear()


def scale_constraints(graph: Graph) -> tuple[list[list[str]], dict[str, float]]:
    """Scale ties and fixed scales of ``graph``'s DLA-capable ops (the op table's)."""
    from accel.compiler.reference import scale_constraints as constraints

    return constraints(graph)
