"""The ``nvdla`` device: compiled subgraphs on a simulated NVDLA.

``prerun`` compiles the subgraph (``accel.compiler``) into a loadable and loads
it into a runtime on a backend (the bit-accurate cmodel by default); ``run``
quantizes the fp32 inputs with their calibrated scales and zero points, packs them into
NVDLA's feature layout, submits the task (the firmware programs the hardware
register by register), and unpacks and dequantizes the outputs.

With ``capture=True`` each run also records every activation of the subgraph
as the hardware left it in memory, right after the operation that completed
it (before any later operation could reuse the memory), so it can be checked
against the int8 CPU reference of the same subgraph (:meth:`NvdlaDevice.reference`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accel.backends import BACKENDS, get_backend
from accel.compiler import CompiledSubgraph, compile_subgraph, run_reference, supports
from accel.compiler.reference import scale_constraints as _scale_constraints
from accel.compiler.reference import zero_point_constraints as _zero_point_constraints
from accel.compiler.reference import zero_pow2_constraints as _zero_pow2_constraints
from accel.config import DEFAULT_PRESET, HwConfig, get_preset
from accel.ir import Graph, Node
from accel.layout import pack_feature, unpack_feature
from accel.runtime.umd import Runtime
from tengine_host.errors import TengineInputError
from tengine_host.quant.weights import dequantize, quantize_activation, quantize_counted


def scale_constraints(graph: Graph) -> tuple[list[list[str]], dict[str, float]]:
    """Scale ties and fixed scales of ``graph``'s DLA-capable ops (the op table's)."""
    return _scale_constraints(graph)


def zero_point_constraints(graph: Graph
                           ) -> tuple[list[list[str]], set[str], list[list[str]]]:
    """Tensors of ``graph`` that must share one zero point, activations whose DLA consumer
    cannot honour one, and sets of which at most one may have one (the op table's)."""
    return _zero_point_constraints(graph)


def zero_pow2_constraints(graph: Graph) -> set[str]:
    """Activations of ``graph`` some DLA node reads with a zero point only of 0 or
    ``-2**k`` (the op table's)."""
    return _zero_pow2_constraints(graph)


@dataclass
class NvdlaPrepared:
    compiled: CompiledSubgraph
    runtime: Runtime
    captured: dict[str, np.ndarray] = field(default_factory=dict)   # tensor -> int8

    @property
    def cycles(self) -> int:
        """Estimated cycles of the last run, from the cmodel's op records (summed when
        asked: a thousand records per inference of a large network)."""
        return sum(op.cycles for op in self.runtime.backend.stats)


class NvdlaDevice:
    """Simulated NVDLA.

    Parameters
    ----------
    preset : str or HwConfig
        Hardware configuration (``accel.config.PRESETS``), nv_small by default.
    backend : str
        Runtime backend name (``accel.backends.BACKENDS``).
    simulator : str
        With the ``rtl`` backend: the HDL simulator (icarus or verilator).
    capture : bool
        Record every activation's int8 value on every run (:attr:`NvdlaPrepared.captured`).
    keep_float : iterable of str
        Node names the DLA declines although it could run them: they stay in fp32 on
        the CPU (``--keep-float``, :func:`tengine_host.partition.resolve_keep_float`).
    """

    name = "nvdla"
    # Loadables are compiled for batch 1: the executor splits larger batches.
    max_batch = 1

    def __init__(self, preset: str | HwConfig = DEFAULT_PRESET, backend: str = "cmod",
                 capture: bool = False, trace_regs: bool = False,
                 simulator: str = "icarus", keep_float=()) -> None:
        self.cfg = preset if isinstance(preset, HwConfig) else get_preset(preset)
        if backend not in BACKENDS:
            raise ValueError(f"backend {backend!r} not in {', '.join(BACKENDS)}")
        if backend == "rtl":
            from accel.rtl.sim import SIMULATORS  # the RTL stack loads only when asked for
            if simulator not in SIMULATORS:
                raise ValueError(f"simulator {simulator!r} not in {', '.join(SIMULATORS)}")
        self.backend_name = backend
        self.simulator = simulator
        self.capture = capture
        self.trace_regs = trace_regs  # print every register write (--trace-regs)
        self.keep_float = frozenset(keep_float)
        #: what the ``rtl`` backend ran, summed over closed subgraphs: convolutions, PDP,
        #: SDP-from-memory and CDP operations and cycles on the RTL engine, convolutions it
        #: ran in kernel pieces (weights larger than its memory), operations left to the
        #: cmodel (by reason)
        self.rtl_summary = {"convolutions": 0, "pdp": 0, "sdp": 0, "cdp": 0, "cycles": 0,
                            "split": 0, "on_cmodel": {}}

    def supports(self, node: Node, graph: Graph) -> tuple[bool, str]:
        if node.name in self.keep_float:
            return False, "kept in fp32 (--keep-float)"
        return supports(node, graph, self.cfg)

    def prerun(self, subgraph: Graph, quant_table) -> NvdlaPrepared:
        if quant_table is None:
            raise ValueError("the nvdla device runs int8 and needs a calibration table "
                             "(opendla quantize)")
        compiled = compile_subgraph(subgraph, quant_table, self.cfg)
        options = {"simulator": self.simulator} if self.backend_name == "rtl" else {}
        runtime = Runtime(self.cfg, get_backend(self.backend_name, self.cfg, **options),
                          trace_regs=self.trace_regs)
        runtime.load(compiled.loadable)
        return NvdlaPrepared(compiled, runtime)

    def quantize_inputs(self, compiled: CompiledSubgraph,
                        inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The int8 values (host shapes) the DLA receives for fp32 ``inputs``."""
        out = {}
        for t in compiled.inputs:
            if t.name not in inputs:
                raise KeyError(f"input {t.name!r} missing (have {', '.join(inputs)})")
            x = np.asarray(inputs[t.name], dtype=np.float32)
            if x.shape != t.host_shape:
                raise TengineInputError(f"input {t.name!r} has shape {x.shape}; the loadable "
                                        f"was compiled for {t.host_shape}")
            q, bad = quantize_counted(x, t.scale, t.zero_point)
            if bad:
                raise TengineInputError(f"input {t.name!r} has {bad} NaN/Inf value(s); the DLA "
                                        f"quantizes to int8 and cannot represent them")
            out[t.name] = q
        return out

    def run(self, prepared: NvdlaPrepared, inputs: dict[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
        """One inference of batch 1 (the executor splits larger batches, ``max_batch``).

        Inputs are quantized and outputs dequantized with the host's own
        functions, the ones the CPU int8 path uses, so both paths agree.
        """
        compiled, rt = prepared.compiled, prepared.runtime
        for name, q in self.quantize_inputs(compiled, inputs).items():
            t = compiled.tensors[name]
            rt.bind_input(name, pack_feature(q.reshape(t.region.shape), t.layout))
        prepared.captured = {}
        if self.capture:
            self._watch(prepared)
        try:
            rt.submit()
        finally:
            rt.firmware.on_complete = None
        outs = {t.name: dequantize(unpack_feature(rt.read_output(t.name), t.layout),
                                   t.scale, t.zero_point).reshape(t.host_shape)
                for t in compiled.outputs}
        return outs

    def _read(self, prepared: NvdlaPrepared, name: str) -> np.ndarray:
        compiled, rt = prepared.compiled, prepared.runtime
        t = compiled.tensors[name]
        mem, offset = compiled.location(name)
        raw = rt.backend.read_mem(rt.mem_address[mem] + offset, t.layout.size)
        return unpack_feature(raw, t.layout).reshape(t.host_shape)

    def _watch(self, prepared: NvdlaPrepared) -> None:
        """Capture each tensor right after the firmware op that completes it."""
        compiled = prepared.compiled
        last_fw = {ops[-1]: j for j, ops in enumerate(compiled.fw_ops)}
        due: dict[int, list[str]] = {}
        for name, j in compiled.ready.items():
            due.setdefault(j, []).append(name)
        for name in due.pop(-1, []):        # bound inputs: as written
            prepared.captured[name] = self._read(prepared, name)

        def on_complete(fw_index: int) -> None:
            j = last_fw.get(fw_index)
            for name in due.get(j, []) if j is not None else []:
                prepared.captured[name] = self._read(prepared, name)
        prepared.runtime.firmware.on_complete = on_complete

    def reference(self, prepared: NvdlaPrepared, inputs: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
        """The int8 CPU golden of the same subgraph: every activation the DLA stores, from
        fp32 ``inputs`` quantized exactly as :meth:`run` does.  An intermediate the
        compiler fused away (``compiled.fused``: a convolution's output a lookup table
        consumed on the fly, the passes of a chain folded into one table) is never in
        memory and is left out."""
        compiled = prepared.compiled
        ref = run_reference(compiled.graph, compiled.plans,
                            self.quantize_inputs(compiled, inputs))
        return {t: v for t, v in ref.items() if t in compiled.tensors}

    def dequantize_outputs(self, prepared: NvdlaPrepared,
                           values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """fp32 outputs from int8 ``values`` (as :meth:`run` returns them)."""
        return {t.name: dequantize(values[t.name], t.scale, t.zero_point).reshape(t.host_shape)
                for t in prepared.compiled.outputs}

    def postrun(self, prepared: NvdlaPrepared) -> None:
        prepared.captured.clear()
        backend = prepared.runtime.backend
        if self.backend_name == "rtl":
            dla = backend.dla
            self.rtl_summary["convolutions"] += dla.rtl_kinds.get("conv", 0)
            self.rtl_summary["pdp"] += dla.rtl_kinds.get("pdp", 0)
            self.rtl_summary["sdp"] += dla.rtl_kinds.get("sdp", 0)
            self.rtl_summary["cdp"] += dla.rtl_kinds.get("cdp", 0)
            self.rtl_summary["cycles"] += dla.rtl_cycles
            self.rtl_summary["split"] += dla.split_ops
            for why, n in dla.fallbacks.items():
                self.rtl_summary["on_cmodel"][why] = self.rtl_summary["on_cmodel"].get(why, 0) + n
        close = getattr(backend, "close", None)
        if close is not None:
            close()         # the rtl backend ends its simulation


def int8_node(node: Node, graph: Graph, table, cfg: HwConfig):
    """The CPU int8 golden of one node, as a function of its fp32 inputs (None when the
    DLA of ``cfg`` does not run the node).

    Activation inputs are quantized with their scales and zero points, the node goes
    through its op-table reference with the plan the compiler makes, and the int8
    outputs are dequantized; the ``cpu`` device's int8 precision is built from these.
    """
    from accel.compiler import CompileError, as_scales, entry_for, make_plan
    from accel.compiler.scales import zero_point_of

    ok, _ = supports(node, graph, cfg)
    if not ok:
        return None
    try:
        plan = make_plan(node, graph, cfg, table)
    except CompileError as exc:
        raise TengineInputError(str(exc)) from exc
    entry = entry_for(node)
    table = as_scales(table)
    params = [None if not t or graph.is_constant(t) else
              (table.scale(t), zero_point_of(table, t)) for t in node.inputs]
    outs = [t for t in node.outputs if t]
    out_params = [(table.scale(t), zero_point_of(table, t)) for t in outs]

    def run(args: list[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        ins = [None if p is None or a is None else quantize_activation(a, *p)
               for a, p in zip(args, params, strict=True)]
        batch = next(a.shape[0] for a in ins if a is not None)
        # the plan is for batch 1 (as the DLA runs it): one sample at a time
        per = [entry.reference(plan, [None if a is None else a[n:n + 1] for a in ins])
               for n in range(batch)]
        return tuple(dequantize(np.concatenate([p[i] for p in per]), *sz)
                     for i, sz in enumerate(out_params))
    return run
