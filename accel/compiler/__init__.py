"""Accelerator compiler: host subgraph -> NVDLA loadable, through one op table.

* :func:`supports` answers whether the DLA can run a node (the partitioner
  asks it, the compiler asserts it) - :mod:`accel.compiler.ops`;
* :func:`compile_subgraph` lowers a supported subgraph into engine operations
  (:mod:`.lowering`, :mod:`.tiling`), plans its memory (:mod:`.memory`) and
  emits a loadable (:mod:`.emitter`);
* :func:`run_reference` is the int8 CPU golden of a compiled subgraph, the
  op table's plain-numpy references on the same plans (:mod:`.reference`).
"""

from __future__ import annotations

from accel.compiler.compile import CompiledSubgraph, compile_subgraph
from accel.compiler.ops import TABLE, entry_for, supports
from accel.compiler.plans import make_plan
from accel.compiler.reference import run_reference, scale_constraints, zero_point_constraints
from accel.compiler.scales import CompileError, as_scales, zero_point_of

__all__ = ["TABLE", "CompileError", "CompiledSubgraph", "as_scales", "compile_subgraph",
           "entry_for", "make_plan", "run_reference", "scale_constraints", "supports",
           "zero_point_constraints", "zero_point_of"]
