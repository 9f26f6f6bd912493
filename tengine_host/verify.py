"""Verification of a device run against the int8 CPU reference of the same partition.

The device path runs as usual with the ``nvdla`` device capturing every
activation of its subgraphs as the hardware left it.  Independently, the
reference path walks the same partition: CPU subgraphs run in fp32 as on the
device path, DLA subgraphs through the op table's plain-numpy int8
references with the compiler's own parameters
(:meth:`tengine_host.devices.nvdla.NvdlaDevice.reference`), fed by the
reference path's own values.  Every DLA activation of the two paths must be
equal byte for byte; the first that is not is where the accelerator (or the
compiler) went wrong, and every later one follows from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tengine_host.executor import Executor
from tengine_host.interpreter import check_feeds


@dataclass
class Mismatch:
    """A DLA tensor whose device value differs from the reference's."""

    tensor: str
    node: str
    op_type: str
    subgraph: int
    sample: int
    differing: int           # elements
    total: int
    max_abs_diff: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Checked:
    """One DLA tensor the verification compares (once per sample)."""

    tensor: str
    node: str
    op_type: str
    shape: tuple[int, ...]


@dataclass
class VerifyReport:
    samples: int = 0
    layers_checked: int = 0          # tensors compared per sample
    mismatches: list[Mismatch] = field(default_factory=list)
    checked: dict[str, Checked] = field(default_factory=dict)   # in graph order

    @property
    def bit_exact(self) -> bool:
        return self.layers_checked > 0 and not self.mismatches

    @property
    def first_divergent(self) -> Mismatch | None:
        return self.mismatches[0] if self.mismatches else None

    def summary(self) -> str:
        if self.layers_checked == 0:
            return "verify: no DLA subgraph, nothing to check"
        if self.bit_exact:
            return (f"verify: bit-exact - {self.layers_checked} DLA tensors x {self.samples} "
                    f"sample(s) equal the int8 CPU reference")
        first = self.mismatches[0]
        tensors = len({m.tensor for m in self.mismatches})
        samples = len({m.sample for m in self.mismatches})
        return (f"verify: MISMATCH - {tensors} of {self.layers_checked} DLA tensors differ "
                f"(in {samples} of {self.samples} sample(s)); first: {first.tensor!r} "
                f"({first.op_type} {first.node!r}, subgraph {first.subgraph}, sample "
                f"{first.sample}): {first.differing}/{first.total} values, max |diff| "
                f"{first.max_abs_diff}")


def _producers(ex: Executor) -> dict[str, tuple[str, str]]:
    return {t: (n.name, n.op_type) for n in ex.graph.nodes for t in n.outputs if t}


@dataclass
class DlaValue:
    """One DLA tensor of one run: the int8 reference's value and the device's."""

    tensor: str
    node: str
    op_type: str
    subgraph: int
    scale: float                  # int8 -> real: (value - zero_point) * scale
    reference: np.ndarray         # int8, host shape
    device: np.ndarray | None     # int8 as the hardware left it (None: never captured)
    zero_point: int = 0

    @property
    def equal(self) -> bool:
        return (self.device is not None and self.device.shape == self.reference.shape
                and np.array_equal(self.device, self.reference))


def run_both(ex: Executor, feeds: Mapping[str, np.ndarray]
             ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[DlaValue]]:
    """Run batch-1 ``feeds`` through ``ex`` (prepared, nvdla device with ``capture=True``)
    and through the reference path; returns the device outputs, the reference path's
    outputs and every DLA tensor of both paths, in execution order."""
    outputs = ex.run(feeds)
    producers = _producers(ex)
    env = check_feeds(ex.graph, feeds)
    values: list[DlaValue] = []
    for i, (dev, sub, handle) in enumerate(ex.prepared):
        sub_feeds = {t: env[t] for t in sub.inputs}
        if not callable(getattr(dev, "reference", None)):
            env.update(dev.run(handle, sub_feeds))
            continue
        if not dev.capture:
            raise ValueError("verification needs the nvdla device created with capture=True")
        ref = dev.reference(handle, sub_feeds)
        for name, want in ref.items():
            if name in sub.inputs:
                continue
            node, op_type = producers.get(name, ("?", "?"))
            t = handle.compiled.tensors[name]
            values.append(DlaValue(name, node, op_type, i, t.scale, want,
                                   handle.captured.get(name), t.zero_point))
        env.update(dev.dequantize_outputs(handle, ref))
    return outputs, {t: env[t] for t in ex.graph.outputs}, values


def verify_run(ex: Executor, feeds: Mapping[str, np.ndarray],
               report: VerifyReport | None = None
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], VerifyReport]:
    """:func:`run_both` and the comparison of every DLA tensor; returns the device
    outputs, the reference path's outputs and the report (``report`` accumulates over
    calls)."""
    report = report if report is not None else VerifyReport()
    outputs, ref_outputs, values = run_both(ex, feeds)
    sample = report.samples
    report.samples += 1
    for v in values:
        want, got = v.reference, v.device
        report.checked.setdefault(v.tensor, Checked(v.tensor, v.node, v.op_type,
                                                    tuple(want.shape)))
        if not v.equal:
            diff = (np.abs(got.astype(np.int64) - want.astype(np.int64))
                    if got is not None and got.shape == want.shape else None)
            report.mismatches.append(Mismatch(
                v.tensor, v.node, v.op_type, v.subgraph, sample,
                int(np.count_nonzero(diff)) if diff is not None else int(want.size),
                int(want.size), int(diff.max()) if diff is not None else -1))
    report.layers_checked = max(report.layers_checked, len(values))
    return outputs, ref_outputs, report
