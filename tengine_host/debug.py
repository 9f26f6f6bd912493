"""Tengine's debugging switches: ``TG_DEBUG_GRAPH``, ``TG_DEBUG_TIME``, ``TG_DEBUG_DATA``,
``TG_DEBUG_REF``.

* GRAPH: print the graph after shape inference and passes (every node with its
  input / output shapes) when the executor prepares it;
* TIME: print a per-node time table after each run;
* DATA: write every node's inputs and outputs to ``./output`` (or the
  directory given) as ``.npy`` files after each run;
* REF: run the CPU's compute-heavy ops through naive reference kernels
  (direct loops over kernel taps in float64) instead of the im2col / BLAS
  paths, to tell an optimized-kernel bug from a model problem.

Each switch is on when its variable is set to anything but ``""`` or ``"0"``;
``opendla run`` has a flag for each.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from accel.ir import Graph, Node
from tengine_host.errors import TengineInputError, reason

ENV_VARS = {"graph": "TG_DEBUG_GRAPH", "time": "TG_DEBUG_TIME", "data": "TG_DEBUG_DATA",
            "ref": "TG_DEBUG_REF"}
DEFAULT_DATA_DIR = "output"


@dataclass(frozen=True)
class DebugOptions:
    """Which debugging aids are on; ``data_dir`` is where TG_DEBUG_DATA writes."""

    graph: bool = False
    time: bool = False
    data: bool = False
    ref: bool = False
    data_dir: str = DEFAULT_DATA_DIR

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DebugOptions:
        """Options from the ``TG_DEBUG_*`` environment variables."""
        env = os.environ if environ is None else environ
        on = {key: env.get(var, "") not in ("", "0") for key, var in ENV_VARS.items()}
        return cls(**on)

    def merged(self, **flags: bool) -> DebugOptions:
        """These options with every flag that is True switched on too (CLI over env)."""
        return DebugOptions(**{k: getattr(self, k) or bool(flags.get(k, False))
                               for k in ENV_VARS}, data_dir=self.data_dir)


def format_graph(graph: Graph) -> str:
    """The graph as text: inputs, then one line per node with shapes, then outputs."""
    def desc(t: str) -> str:
        if not t:
            return "-"
        tensor = graph.tensors.get(t)
        if tensor is None:
            return f"{t}:?"
        kind = "const " if tensor.data is not None else ""
        return f"{t}:{kind}{np.dtype(tensor.dtype).name}{list(tensor.shape)}"

    lines = [f"graph {graph.name!r}: {len(graph.nodes)} nodes",
             "inputs: " + ", ".join(desc(t) for t in graph.inputs)]
    for i, node in enumerate(graph.nodes):
        attrs = ", ".join(f"{k}={_short(v)}" for k, v in node.attrs.items())
        lines.append(f"  {i:>4} {node.name} ({node.op_type}) "
                     f"[{', '.join(desc(t) for t in node.inputs)}] -> "
                     f"[{', '.join(desc(t) for t in node.outputs)}]"
                     + (f" {{{attrs}}}" if attrs else ""))
    lines.append("outputs: " + ", ".join(desc(t) for t in graph.outputs))
    return "\n".join(lines)


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}" if v.size > 8 else str(v.tolist())
    return str(v)


def time_table(rows: list[tuple[str, str, str, float]]) -> str:
    """``(node, op, device, seconds)`` rows as a table with each node's share of the total."""
    total = sum(r[3] for r in rows) or 1.0
    width = max([len(r[0]) for r in rows] + [4])
    lines = [f"{'node':<{width}}  {'op':<20} {'device':<10} {'ms':>10} {'%':>6}"]
    for name, op, dev, sec in rows:
        lines.append(f"{name:<{width}}  {op:<20} {dev:<10} {sec * 1e3:10.3f} "
                     f"{100 * sec / total:6.1f}")
    lines.append(f"{'total':<{width}}  {'':<20} {'':<10} {total * 1e3:10.3f} {100.0:6.1f}")
    return "\n".join(lines)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def dump_node_data(graph: Graph, values: Mapping[str, np.ndarray], out_dir: str | Path
                   ) -> list[Path]:
    """Write each node's inputs and outputs found in ``values`` (or constant) to ``out_dir``.

    Files are ``<index>_<node>.in<i>.<tensor>.npy`` / ``.out<i>.``, in execution
    order.  Tensors a device kept internal (inside a DLA subgraph) are absent
    from ``values`` and skipped.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TengineInputError(f"node data folder {str(out_dir)!r}: cannot create it: "
                                f"{reason(exc, out_dir)}") from exc
    written = []
    for i, node in enumerate(graph.nodes):
        for kind, names in (("in", node.inputs), ("out", node.outputs)):
            for j, t in enumerate(names):
                if not t:
                    continue
                v = values.get(t)
                if v is None and graph.is_constant(t):
                    v = graph.tensors[t].data
                if v is None:
                    continue
                path = out / f"{i:04d}_{_safe(node.name)}.{kind}{j}.{_safe(t)}.npy"
                np.save(path, np.asarray(v))
                written.append(path)
    return written


# ----------------------------------------------------------------- reference kernels

def ref_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, strides, pads,
             dilations, group: int = 1, activation: str | None = None,
             **attrs: Any) -> np.ndarray:
    """Direct 2-D convolution: one shifted window per kernel tap, float64 sums."""
    if x.ndim != 4:
        raise ValueError(f"reference Conv handles 2-D (NCHW) input, got rank {x.ndim}")
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    top, left, bottom, right = pads
    xp = np.zeros((n, c, h + top + bottom, wd + left + right))
    xp[:, :, top:top + h, left:left + wd] = x
    oh = (h + top + bottom - dh * (r - 1) - 1) // sh + 1
    ow = (wd + left + right - dw * (s - 1) - 1) // sw + 1
    kg = k // group
    y = np.zeros((n, k, oh, ow))
    for g in range(group):
        for i in range(r):
            for j in range(s):
                win = xp[:, g * cg:(g + 1) * cg, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                         j * dw:j * dw + (ow - 1) * sw + 1:sw]
                y[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", win,
                                                       w[g * kg:(g + 1) * kg, :, i, j])
    if b is not None:
        y += np.asarray(b, np.float64).reshape(1, k, 1, 1)
    return _activate(y, activation, **attrs)


def ref_gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, alpha: float = 1.0,
             beta: float = 1.0, transA: int = 0, transB: int = 0,
             activation: str | None = None, **attrs: Any) -> np.ndarray:
    """``alpha * A' B' + beta * C`` as explicit float64 sums over the inner dimension."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a = a.T if transA else a
    b = b.T if transB else b
    y = np.sum(a[:, :, None] * b[None, :, :], axis=1) * alpha
    if c is not None:
        y = y + beta * np.asarray(c, np.float64)
    return _activate(y, activation, **attrs)


def _activate(y: np.ndarray, activation: str | None, activation_max: float | None = None,
              activation_slope: np.ndarray | None = None,
              activation_alpha: float | None = None, **_: Any) -> np.ndarray:
    """A fused activation on float64 ``y`` (channels on axis 1), written out plainly."""
    if activation == "Relu":
        y = np.maximum(y, 0)
    elif activation == "Clip":
        if activation_max is None:
            raise ValueError("reference fused Clip needs activation_max")
        y = np.minimum(np.maximum(y, 0), float(activation_max))
    elif activation == "PRelu":
        if activation_slope is None:
            raise ValueError("reference fused PRelu needs activation_slope")
        slope = np.asarray(activation_slope, np.float64).reshape(-1)
        slope = np.broadcast_to(slope, (y.shape[1],)).reshape(1, -1, *([1] * (y.ndim - 2)))
        y = np.where(y < 0, y * slope, y)
    elif activation == "LeakyRelu":
        alpha = 0.01 if activation_alpha is None else float(activation_alpha)
        y = np.where(y < 0, y * alpha, y)
    elif activation is not None:
        raise ValueError(f"reference kernels know fused activations Relu, Clip, PRelu and "
                         f"LeakyRelu, not {activation!r}")
    return y.astype(np.float32)


#: op type -> naive kernel with the registered fp32 function's signature.
REFERENCE_KERNELS: dict[str, Callable[..., np.ndarray]] = {"Conv": ref_conv, "Gemm": ref_gemm}


def reference_override(node: Node) -> Callable[[list[np.ndarray | None]], tuple[np.ndarray, ...]
                                               ] | None:
    """An interpreter override running ``node`` through its reference kernel, if it has one."""
    fn = REFERENCE_KERNELS.get(node.op_type)
    if fn is None or (node.op_type == "Conv" and len(node.attrs.get("strides", ())) != 2):
        return None
    attrs = node.attrs

    def run(args: list[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        return (fn(*args, **attrs),)
    return run
