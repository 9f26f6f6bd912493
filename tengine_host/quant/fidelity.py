"""How close the int8 path stays to fp32 on inputs the calibration did not see.

A calibration table is only as good as the answers it gives.  :func:`calibrate_checked`
keeps part of the samples aside (or, when they are few, cross-validates), calibrates
on the rest and runs the held-out samples through fp32 and through the int8 CPU
reference of exactly the partition the DLA runs (every node the preset supports, with
the compiler's own parameters: :class:`~tengine_host.devices.cpu.CpuDevice` in int8).
The DLA is bit-exact to that reference, so these are the DLA's numbers.

The report gives, per model output, the signal-to-quantization-noise ratio (SQNR,
``10 log10(sum fp32**2 / sum (int8 - fp32)**2)`` over every held-out value), the
cosine similarity and the largest error, and for class-score outputs the share of
samples whose top-1 class is fp32's.  An output made by a Concat is measured part by
part (:func:`output_parts`): one ratio over boxes in pixels beside scores in 0..1
would be the boxes' alone.  Per DLA layer (measured after the activation that alone
reads its output, if one does: :func:`~tengine_host.quant.range_search.activation_after`)
it gives two ratios: the layer alone (its int8 reference fed the fp32 values of its
inputs: the error this layer adds, which is what points at a culprit) and in context
(its value in the int8 run, with the error of every layer before it).  Layers are
listed by the first, worst first.  :meth:`FidelityReport.warnings` names what falls
short of :data:`MIN_OUTPUT_SQNR_DB` or :data:`MIN_TOP1_AGREEMENT`.

Why those thresholds:

* **20 dB** is an error whose RMS is a tenth of the output's.  Int8 with per-channel
  weights keeps well-conditioned outputs at 25-35 dB (landmark coordinates, box
  regressions, logits); below 20 dB the error is as large as the differences a
  downstream threshold or ranking looks at (a 10 % RMS error on a logit moves a
  score across 0.5, on a box coordinate it moves the box by a tenth of its size).
* **95 %** top-1 agreement is the goal the project holds classifiers to: past it the
  int8 model gives another answer on more than one image in twenty.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TypeVar

import numpy as np

from accel.ir import Graph
from tengine_host.interpreter import interpret, tensor_value
from tengine_host.ops import run_op
from tengine_host.quant.coarse_outputs import MOVEMENT_OPS, movers
from tengine_host.quant.coarse_outputs import describe as describe_coarse
from tengine_host.quant.range_search import activation_after
from tengine_host.quant.rewrites import GraphRewrites, with_rewrites
from tengine_host.quant.rewrites import apply as apply_rewrites
from tengine_host.quant.table import QuantTable

#: an output whose held-out SQNR is below this warns (see the module docstring)
MIN_OUTPUT_SQNR_DB = 20.0
#: a class-score output whose held-out top-1 agreement is below this warns
MIN_TOP1_AGREEMENT = 0.95
#: layers named in a warning and listed first in the report
WORST_LAYERS = 5
#: with fewer samples than this, cross-validate instead of holding samples out
MIN_SAMPLES_TO_HOLD_OUT = 8
#: share of the samples held out (at least one)
HOLD_OUT_SHARE = 0.25
#: output layers are tried in fp32 only when their multiply-accumulates are at most this
#: share of the model's (a network's heads, not a network that is all head) ...
FLOAT_OUTPUTS_MAC_SHARE = 0.05
#: ... and kept so when none loses and an output's held-out SQNR gains at least this much
#: or the int8 output clipped held-out values (see :func:`_gains`)
FLOAT_OUTPUTS_GAIN_DB = 1.0
#: the name the report gives them
FLOAT_OUTPUTS = "fp32 outputs"
#: folds when cross-validating (at most one per sample)
FOLDS = 4
#: the spread of a ratio measured on ``n`` values is about this over ``sqrt(n)`` dB:
#: ``10 / ln(10) * sqrt(2)``, see :func:`weight`
SCORE_DB_PER_ROOT_VALUE = 10.0 / math.log(10.0) * math.sqrt(2.0)
#: values at which an output's ratio counts half in :func:`score`: its spread is then the
#: 1 dB that decides between candidates
SCORE_VALUES = (SCORE_DB_PER_ROOT_VALUE / FLOAT_OUTPUTS_GAIN_DB) ** 2


@dataclass
class ErrorStats:
    """Running sums for SQNR, cosine and the largest error of ``approx`` against ``ref``."""

    signal: float = 0.0       # sum ref**2
    noise: float = 0.0        # sum (approx - ref)**2
    dot: float = 0.0          # sum ref * approx
    approx_energy: float = 0.0
    max_error: float = 0.0
    values: int = 0

    def add(self, ref: np.ndarray, approx: np.ndarray) -> None:
        r = np.asarray(ref, dtype=np.float64).ravel()
        a = np.asarray(approx, dtype=np.float64).ravel()
        e = a - r
        self.signal += float(r @ r)
        self.noise += float(e @ e)
        self.dot += float(r @ a)
        self.approx_energy += float(a @ a)
        self.max_error = max(self.max_error, float(np.max(np.abs(e))) if e.size else 0.0)
        self.values += r.size

    @property
    def sqnr_db(self) -> float:
        """``inf`` when the two agree exactly; ``-inf`` for an all-zero reference that is
        not matched."""
        if self.noise == 0.0:
            return math.inf
        if self.signal == 0.0:
            return -math.inf
        return 10.0 * math.log10(self.signal / self.noise)

    @property
    def cosine(self) -> float:
        if self.signal == 0.0 and self.approx_energy == 0.0:
            return 1.0
        if self.signal == 0.0 or self.approx_energy == 0.0:
            return 0.0
        return self.dot / math.sqrt(self.signal * self.approx_energy)


@dataclass
class OutputFidelity:
    name: str
    sqnr_db: float
    cosine: float
    max_error: float
    top1_agreement: float | None     # class-score outputs only
    # share of the values that fp32 puts past the int8 output's range and int8 holds at
    # its end (clipped); 0 for an output the int8 path computes in fp32
    clipped: float = 0.0
    # values the ratios were measured on (0: not counted); see :func:`score`
    values: int = 0


@dataclass
class LayerFidelity:
    name: str               # the tensor the DLA computes
    op_type: str            # the node that produces it
    sqnr_db: float          # the layer alone: int8 on fp32 inputs, against fp32
    cosine: float
    sqnr_in_context_db: float   # in the int8 run, after every layer before it


@dataclass
class FidelityReport:
    """Held-out fidelity of one calibration (see the module docstring)."""

    check: str                      # "held-out", "cross-validated" or "unchecked"
    calibration_samples: int        # samples the written table was calibrated on
    checked_samples: int            # samples the numbers come from (0: unchecked)
    outputs: list[OutputFidelity] = field(default_factory=list)
    layers: list[LayerFidelity] = field(default_factory=list)   # worst first
    folds: int = 0                  # cross-validation folds
    applied: str = "symmetric"      # the variant of the table written (see calibrate_checked)
    variants: dict[str, float] = field(default_factory=dict)   # variant -> score (dB)

    def warnings(self, min_sqnr_db: float = MIN_OUTPUT_SQNR_DB,
                 min_top1: float = MIN_TOP1_AGREEMENT) -> list[str]:
        """One message per output that falls short, naming the worst layers."""
        if self.check == "unchecked":
            return [f"int8 fidelity unchecked: {self.calibration_samples} calibration sample(s) "
                    f"leave none to hold out; give at least 2 to have it measured"]
        worst = ", ".join(f"{la.name} ({_db(la.sqnr_db)})" for la in self.layers[:WORST_LAYERS])
        out = []
        for o in self.outputs:
            short = []
            if o.sqnr_db < min_sqnr_db:
                short.append(f"SQNR {_db(o.sqnr_db)} < {min_sqnr_db:g} dB")
            if o.top1_agreement is not None and o.top1_agreement < min_top1:
                short.append(f"top-1 agrees with fp32 on {o.top1_agreement:.0%} "
                             f"< {min_top1:.0%} of the samples")
            if short:
                out.append(f"output {o.name!r} drifts from fp32 on {self.checked_samples} "
                           f"{self.check} sample(s): {'; '.join(short)}"
                           + (f"; the DLA layers that add the most error (SQNR alone): "
                              f"{worst}" if worst else ""))
        return out

    def as_dict(self) -> dict:
        d = asdict(self)
        d["outputs"] = [json_row(row) for row in d["outputs"]]
        d["layers"] = [json_row(row) for row in d["layers"]]
        return d


def json_row(row: dict) -> dict:
    """``row`` with its infinite floats as ``"inf"`` / ``"-inf"`` and NaN as None: JSON has
    neither (an exact layer's SQNR is infinite)."""
    return {k: (None if math.isnan(v) else ("inf" if v > 0 else "-inf"))
            if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


def score(report: FidelityReport) -> float:
    """One number to rank tables by: the mean over the outputs of their SQNR in dB (each
    capped at 60 dB, where int8 is as good as exact), less 20 dB per unit of top-1
    disagreement (a class-score output that loses 5 % of its answers costs 1 dB), each
    output weighted by how well its few held-out values measure it (:func:`weight`)."""
    if not report.outputs:
        return -math.inf
    weights = [weight(o.values) for o in report.outputs]
    return sum(w * (min(o.sqnr_db, 60.0)
                    - 20.0 * (0.0 if o.top1_agreement is None else 1.0 - o.top1_agreement))
               for w, o in zip(weights, report.outputs, strict=True)) / sum(weights)


def weight(values: int) -> float:
    """An output's weight in :func:`score`: ``n / (n + SCORE_VALUES)`` for ``n`` measured
    values (1 when the count is unknown).

    A ratio measured on ``n`` values estimates the noise's power with a relative spread
    of about ``sqrt(2 / n)`` (a chi-square with ``n`` degrees of freedom), about
    ``6.1 / sqrt(n)`` dB.  Weighting each output by ``1 / (1 + spread**2 / (1 dB)**2)``
    gives the outputs whose ratio is known to better than the 1 dB that decides between
    candidates (:data:`FLOAT_OUTPUTS_GAIN_DB`) their full say, equally, and the rest
    less: a face landmark model's presence flag, one value per image, measured on two
    held-out faces, weighs 0.05 beside its 1,404 coordinates (0.99), and its 3.5 dB from
    one candidate to another no longer outvotes their 1.5 dB."""
    return values / (values + SCORE_VALUES) if values > 0 else 1.0


def score_spread(report: FidelityReport) -> float:
    """How far :func:`score` may be off from sampling alone, in dB: the weighted outputs'
    spreads (``6.1 / sqrt(n)`` dB each, see :func:`weight`) added as independent errors.

    Errors within one output are correlated (a landmark's x and y move together), so
    this is a floor rather than the whole spread; candidates closer than it are not
    told apart by the held-out samples."""
    if not report.outputs:
        return 0.0
    weights = [weight(o.values) for o in report.outputs]
    return math.sqrt(sum((w * SCORE_DB_PER_ROOT_VALUE / math.sqrt(o.values)) ** 2
                         for w, o in zip(weights, report.outputs, strict=True)
                         if o.values > 0)) / sum(weights)


K = TypeVar("K")


def choose(reports: Mapping[K, FidelityReport]) -> K:
    """The first candidate of ``reports`` (in their order: the fewest rewrites first)
    whose :func:`score` is within :func:`score_spread` of the best one's: a rewrite that
    wins by less than the held-out samples can measure has not shown that it helps."""
    scores = {key: score(r) for key, r in reports.items()}
    top = max(scores, key=scores.__getitem__)
    floor = scores[top] - score_spread(reports[top])
    return next(key for key, s in scores.items() if s >= floor)


def _db(v: float) -> str:
    return f"{v:.1f} dB" if math.isfinite(v) else ("exact" if v > 0 else "-inf dB")


def is_class_scores(graph: Graph, tensor: str) -> bool:
    """A classifier's output: ``[N, K]`` scores with ``K >= 2``, or a Softmax's output.

    Outputs such as ``[1, 1404, 1, 1]`` landmark coordinates or ``[1, 84, 2100]``
    detections are not class scores, and top-1 means nothing for them."""
    shape = graph.tensors[tensor].shape
    producer = graph.producer(tensor)
    if producer is not None and producer.op_type in ("Softmax", "LogSoftmax"):
        return True
    return len(shape) == 2 and shape[1] >= 2


Region = tuple[slice, ...]


def output_parts(graph: Graph, tensor: str) -> list[Region]:
    """The regions of output ``tensor`` measured apart: one per computed input of the Concat
    that makes it, and so on down through Concats that make those inputs; the whole
    tensor where no Concat makes it (or a shape is unknown).

    One SQNR over a concatenation is the SQNR of its largest part: a detection head's
    ``[1, 4 + classes, anchors]`` (YOLOv8) puts box coordinates of hundreds of pixels
    beside scores in 0..1, and 34 dB over the whole hides 14 dB on the scores that
    decide which boxes exist.  Constant inputs (anchor tables) are exact and not parts.
    """
    shape = graph.tensors[tensor].shape if tensor in graph.tensors else None
    if not shape or any(not isinstance(d, int) for d in shape):
        return [tuple(slice(None) for _ in shape or ())]
    return _parts(graph, tensor, tuple(slice(0, d) for d in shape))


def _parts(graph: Graph, tensor: str, region: Region) -> list[Region]:
    node = graph.producer(tensor)
    inputs = [t for t in node.inputs if t and not graph.is_constant(t)] if node else []
    if node is None or node.op_type != "Concat" or not inputs or len(node.inputs) < 2:
        return [region]
    axis = node.attrs.get("axis", 0) % len(region)
    parts, start = [], region[axis].start
    for t in node.inputs:
        shape = graph.tensors[t].shape if t in graph.tensors else None
        if not shape or not isinstance(shape[axis], int):
            return [region]
        sub = region[:axis] + (slice(start, start + shape[axis]),) + region[axis + 1:]
        if t in inputs:
            parts += _parts(graph, t, sub)
        start += shape[axis]
    return parts


def part_name(tensor: str, region: Region, shape: Sequence[int]) -> str:
    """``tensor`` with numpy's index of ``region`` when it is not the whole tensor:
    ``output0[:, 4:22]``."""
    whole = [r.start in (None, 0) and r.stop in (None, d) for r, d in zip(region, shape,
                                                                         strict=True)]
    if all(whole):
        return tensor
    last = max(i for i, w in enumerate(whole) if not w)
    return f"{tensor}[" + ", ".join(":" if w else f"{r.start}:{r.stop}" for r, w in
                                    zip(region[:last + 1], whole, strict=False)) + "]"


def measured_parts(graph: Graph) -> dict[str, tuple[str, Region]]:
    """What the check measures apart, by name: ``(output, region)`` for each part of each
    model output (:func:`output_parts`); class scores whole (top-1 judges them whole)."""
    parts: dict[str, tuple[str, Region]] = {}
    for o in graph.outputs:
        regions = [()] if is_class_scores(graph, o) else output_parts(graph, o)
        for region in regions:
            parts[part_name(o, region, graph.tensors[o].shape) if region else o] = (o, region)
    return parts


def clipped_values(entry: Mapping | None, ref: np.ndarray, got: np.ndarray) -> int:
    """How many values ``ref`` (fp32) puts past the int8 range of the table ``entry`` by
    more than half a step while ``got`` (the int8 path's, dequantized) sits at that end of
    the range: values the int8 output clipped.  0 without an entry, or where the int8
    path computed the output in fp32 (its values are not held at the range's ends)."""
    if not entry or not entry.get("scale"):
        return 0
    step, zero = float(entry["scale"]), int(entry.get("zero_point", 0))
    # the converters saturate to codes -128..127, symmetric tensors too
    # (:func:`~tengine_host.quant.weights.quantize_activation`)
    hi, lo = (127 - zero) * step, (-128 - zero) * step
    r = np.asarray(ref, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    half = step / 2
    return int(np.count_nonzero(((r > hi + half) & (np.abs(g - hi) <= half))
                                | ((r < lo - half) & (np.abs(g - lo) <= half))))


class _Accumulator:
    """Held-out statistics over samples (and folds): the model's outputs and, with
    ``layers``, every DLA layer alone and in context (which costs a second int8 run of
    each layer, so candidates are compared on their outputs and only the one reported
    is measured layer by layer)."""

    def __init__(self, preset: str, keep_float: frozenset[str] = frozenset(),
                 layers: bool = True) -> None:
        self.preset = preset
        self.keep_float = keep_float
        self.layers = layers
        self.outputs: dict[str, ErrorStats] = {}     # output or part -> its statistics
        self.parts: dict[str, tuple[str, Region]] = {}   # ... -> (output, region)
        self.top1: dict[str, list[int]] = {}
        self.clipped: dict[str, list[int]] = {}     # ... -> [values clipped, values]
        self.alone: dict[str, ErrorStats] = {}
        self.in_context: dict[str, ErrorStats] = {}
        self.producer: dict[str, str] = {}
        self.samples = 0

    def add(self, graph: Graph, table: QuantTable,
            samples: Sequence[Mapping[str, np.ndarray]],
            refs: Sequence[Mapping[str, np.ndarray]] | None = None) -> None:
        """Run ``samples`` through the int8 path of ``table`` on ``graph`` (with the
        rewrites ``table`` was calibrated for applied: each fold has its own); ``refs``
        are their whole fp32 runs (``interpret(..., keep_all=True)``) when the caller has
        them already."""
        from tengine_host.devices.cpu import CpuDevice

        prepared = CpuDevice("int8", preset=self.preset).prerun(graph, table)
        chosen = dla_nodes(graph, self.preset, self.keep_float | frozenset(table.keep_float))
        overrides = {k: f for k, f in prepared.overrides.items() if k in chosen}
        dla = [n for n in graph.nodes if n.name in overrides] if self.layers else []
        # a layer whose output only an activation reads is measured after it, in fp32: a
        # convolution before nv_small's CDP SiLU has a zero point spanning only what the
        # SiLU tells apart (:func:`~tengine_host.quant.zero_point.flat_ends`), and what it
        # clips below -6 costs nothing after the SiLU, which its own SQNR counts in full
        after = {t: activation_after(graph, t) for n in dla for t in n.outputs if t}
        self.producer.update({o: n.op_type for n in graph.nodes for o in n.outputs})
        for o in graph.outputs:
            if is_class_scores(graph, o):
                self.top1.setdefault(o, [0, 0])
        for name, part in measured_parts(graph).items():
            self.parts.setdefault(name, part)
            self.outputs.setdefault(name, ErrorStats())
        for i, feeds in enumerate(samples):
            ref = refs[i] if refs is not None else interpret(graph, feeds, keep_all=True)
            got = interpret(graph, feeds, overrides=overrides, keep_all=True)
            for name, (o, region) in self.parts.items():
                r, g = np.asarray(ref[o])[region], np.asarray(got[o])[region]
                self.outputs[name].add(r, g)
                counts = self.clipped.setdefault(name, [0, 0])
                counts[0] += clipped_values(table.get(o), r, g)
                counts[1] += np.size(r)
            for o, counts in self.top1.items():
                r = np.asarray(ref[o]).reshape(len(ref[o]), -1)
                g = np.asarray(got[o]).reshape(len(got[o]), -1)
                counts[0] += int(np.sum(r.argmax(axis=1) == g.argmax(axis=1)))
                counts[1] += len(r)
            for node in dla:
                args = [tensor_value(graph, ref, t) for t in node.inputs]
                alone = overrides[node.name](args)
                for t, value in zip(node.outputs, alone, strict=False):
                    if not t:
                        continue
                    want, mine, theirs = ref[t], value, got[t]
                    act = after[t]
                    if act is not None:     # as the activation reading it sees it
                        want = ref[act.outputs[0]]
                        mine, theirs = (run_op(act.op_type, [v if i == t else
                                                             tensor_value(graph, ref, i)
                                                             for i in act.inputs],
                                               act.attrs)[0] for v in (value, got[t]))
                    self.alone.setdefault(t, ErrorStats()).add(want, mine)
                    self.in_context.setdefault(t, ErrorStats()).add(want, theirs)
            self.samples += 1

    def report(self, check: str, calibration_samples: int, folds: int = 0) -> FidelityReport:
        outputs = [OutputFidelity(o, s.sqnr_db, s.cosine, s.max_error,
                                  self.top1[o][0] / self.top1[o][1]
                                  if self.top1.get(o, (0, 0))[1] else None,
                                  self.clipped[o][0] / max(self.clipped[o][1], 1), s.values)
                   for o, s in self.outputs.items()] if self.samples else []
        layers = sorted((LayerFidelity(t, self.producer.get(t, "?"), s.sqnr_db, s.cosine,
                                       self.in_context[t].sqnr_db)
                         for t, s in self.alone.items()), key=lambda la: la.sqnr_db)
        return FidelityReport(check, calibration_samples, self.samples, outputs, layers, folds)


@dataclass
class LayerSensitivity:
    name: str               # the DLA node
    op_type: str
    output_sqnr_db: float   # the worst model output's (or part's) SQNR, this layer alone int8


def sensitivity(graph: Graph, table: QuantTable, samples: Sequence[Mapping[str, np.ndarray]],
                *, preset: str = "nv_small", progress: bool = True,
                keep_float: frozenset[str] = frozenset()) -> list[LayerSensitivity]:
    """Every DLA layer ranked by the output error its quantization alone causes, worst first.

    For each DLA node the graph runs in fp32 except that node, which runs its int8
    reference (its inputs quantized, its weights and arithmetic the DLA's, its output
    quantized); the SQNR of the model output (or part, :func:`measured_parts`) it hurts
    most measures it.  Only the nodes downstream of it are run again.  A layer at the
    top of this list is the one to keep in fp32 (or to look at) first.
    """
    from tengine_host.devices.cpu import CpuDevice
    from tengine_host.ops import run_op
    from tengine_host.quant.progress import progress_bar

    graph = with_rewrites(graph, table)
    prepared = CpuDevice("int8", preset=preset).prerun(graph, table)
    chosen = dla_nodes(graph, preset, keep_float)
    nodes = [(i, n) for i, n in enumerate(graph.nodes) if n.name in prepared.overrides
             and n.name in chosen]
    refs = [interpret(graph, feeds, keep_all=True) for feeds in samples]
    parts = measured_parts(graph)
    out = []

    with progress_bar(len(nodes), "sensitivity", enabled=progress) as bar:
        for i, node in nodes:
            stats = {name: ErrorStats() for name in parts}
            for ref in refs:
                env = dict(ref)
                changed = set()
                for j in range(i, len(graph.nodes)):
                    n = graph.nodes[j]
                    if j > i and not changed.intersection(n.inputs):
                        continue
                    args = [tensor_value(graph, env, t) for t in n.inputs]
                    outs = (prepared.overrides[n.name](args) if j == i
                            else run_op(n.op_type, args, n.attrs))
                    for t, v in zip(n.outputs, outs, strict=False):
                        if t:
                            env[t] = v
                            changed.add(t)
                for name, (o, region) in parts.items():
                    stats[name].add(np.asarray(ref[o])[region], np.asarray(env[o])[region])
            out.append(LayerSensitivity(node.name, node.op_type,
                                        min(s.sqnr_db for s in stats.values())))
            bar.update()
    return sorted(out, key=lambda la: la.output_sqnr_db)


def dla_partition(graph: Graph, preset: str, keep_float: frozenset[str] = frozenset()):
    """The partition the ``nvdla`` device of ``preset`` and the CPU make of ``graph``."""
    from tengine_host.devices import get_device
    from tengine_host.partition import partition

    return partition(graph, [get_device("nvdla", preset=preset, keep_float=keep_float),
                             get_device("cpu")])


def dla_nodes(graph: Graph, preset: str, keep_float: frozenset[str] = frozenset()) -> set[str]:
    """Names of the nodes the partitioner gives the DLA of ``preset`` (the rest run fp32)."""
    parts = dla_partition(graph, preset, keep_float).parts
    return {n.name for dev, sub in parts if dev.name != "cpu" for n in sub.nodes}


def measure(graph: Graph, table: QuantTable, samples: Sequence[Mapping[str, np.ndarray]], *,
            preset: str = "nv_small", check: str = "held-out", calibration_samples: int = 0,
            keep_float: frozenset[str] = frozenset()) -> FidelityReport:
    """Fidelity of ``table`` on ``samples`` (which it should not have been calibrated on)."""
    acc = _Accumulator(preset, keep_float)
    acc.add(with_rewrites(graph, table), table, samples)
    return acc.report(check, calibration_samples)


def split(n: int) -> tuple[str, list[tuple[list[int], list[int]]]]:
    """How :func:`calibrate_checked` uses ``n`` samples: ``(check, [(calibrate, test)])``.

    * ``n >= MIN_SAMPLES_TO_HOLD_OUT``: every fourth sample (a quarter, spread over the
      set so an ordered folder gives each class its share) is held out; the table is
      calibrated on the others;
    * ``2 <= n < MIN_SAMPLES_TO_HOLD_OUT``: ``min(n, FOLDS)`` folds, each held out in turn
      while the rest calibrate; the table is then calibrated on all ``n``;
    * ``n == 1``: nothing to hold out.
    """
    if n < 1:
        raise ValueError("calibration needs at least one input sample")
    if n == 1:
        return "unchecked", []
    if n >= MIN_SAMPLES_TO_HOLD_OUT:
        every = round(1 / HOLD_OUT_SHARE)
        test = list(range(every - 1, n, every))
        return "held-out", [([i for i in range(n) if i not in test], test)]
    folds = min(n, FOLDS)
    return "cross-validated", [([i for i in range(n) if i % folds != f],
                                [i for i in range(n) if i % folds == f]) for f in range(folds)]


def calibrate_checked(graph: Graph, samples: Sequence[Mapping[str, np.ndarray]], *,
                      preset: str = "nv_small", calibrate_fn=None, progress: bool = True,
                      variants: Mapping[str, Callable[[Graph, QuantTable], QuantTable]]
                      | None = None,
                      rewrites: Mapping[str, Callable[[Graph, list], GraphRewrites]]
                      | None = None, keep_float: frozenset[str] = frozenset(),
                      float_outputs: bool = True,
                      **calibrate_options) -> tuple[QuantTable, FidelityReport]:
    """Calibrate ``graph`` and measure the table on samples it was not calibrated on.

    ``calibrate_fn(graph, samples, progress=..., **calibrate_options)`` makes a table
    (:func:`tengine_host.quant.calibrate` by default).  See :func:`split` for which
    samples calibrate the returned table and which check it.

    Candidates are measured on the same held-out samples and the simplest one whose
    :func:`score` the samples do not tell apart from the best is returned
    (:func:`choose`), its report saying which (``applied``) and every candidate's score
    (``variants``):

    * ``rewrites`` maps names to functions ``(graph, calibration samples) ->``
      :class:`~tengine_host.quant.rewrites.GraphRewrites` (cross-layer equalization,
      bias correction); the graph they make is calibrated and carried in the table
      (``table.rewrites``).  Name the graph as loaded ``""`` to make it a candidate
      (without ``rewrites`` it is the only one);
    * ``variants`` maps names to functions that rewrite a calibrated table (zero points,
      :func:`tengine_host.quant.zero_point.assign_zero_points`), tried on each graph;
      the table as calibrated ("symmetric") is always a candidate.

    With ``float_outputs``, the best candidate is then measured once more with the
    DLA layers writing the model's outputs kept in fp32 on the CPU
    (:func:`output_writers`: not class scores, a small share of the work), and that
    is kept when it scores no worse and some output's SQNR gains
    :data:`FLOAT_OUTPUTS_GAIN_DB` (the score averages the outputs, which would hide the
    one a model's user reads most); the table's ``keep_float`` records them and
    ``applied`` ends in :data:`FLOAT_OUTPUTS`.

    Choosing on the samples that also measure the choice flatters it a little; with a
    handful of candidates the bias is small next to the differences that decide.  With
    one sample nothing is measured and the plain table is returned.  ``keep_float``
    names nodes that stay fp32 (``--keep-float``): the check runs the partition
    without them.
    """
    if calibrate_fn is None:
        from tengine_host.quant.calibrate import calibrate as calibrate_fn
    samples = list(samples)
    check, folds = split(len(samples))
    graph_rewrites = dict(rewrites) if rewrites else {"": lambda g, cal: GraphRewrites()}
    table_rewrites = {"symmetric": lambda g, t: t, **(variants or {})}

    def pick(idx: list[int]) -> list[Mapping[str, np.ndarray]]:
        return [samples[i] for i in idx]

    def calibrated(rewrite, cal: list, ranges: dict) -> tuple[Graph, QuantTable]:
        """The graph ``rewrite`` makes from ``cal`` and its table, carrying the rewrite.

        Bias correction moves a layer's outputs by the mean shift of its weights'
        rounding, a small fraction of their range: it reuses the ranges calibrated
        without it (``ranges``, by equalization), and the check measures the table as
        it will be used.  Calibration is most of the cost of a candidate.  Layers the
        calibration keeps in fp32 (the table's ``keep_float``) lose their correction."""
        made = rewrite(graph, cal)
        plain = made.without_shifts()
        if plain.key() not in ranges:
            ranges[plain.key()] = calibrate_fn(apply_rewrites(graph, plain), cal,
                                               progress=progress, **calibrate_options)
        base = ranges[plain.key()]
        kept = kept_float(graph, base, preset, keep_float)
        made = made.without_shifts(kept)
        table = QuantTable({name: dict(e) for name, e in base.items()}, rewrites=made,
                           keep_float=kept)
        return apply_rewrites(graph, made), table

    if check == "unchecked":     # nothing to choose on: the first graph, the plain table
        return (calibrated(next(iter(graph_rewrites.values())), samples, {})[1],
                FidelityReport(check, len(samples), 0))
    calibrated_on = len(folds[0][0]) if check == "held-out" else len(samples)
    n_folds = len(folds) if len(folds) > 1 else 0
    fold_ranges: list[dict] = [{} for _ in folds]      # each fold's calibrations, reused
    fold_made: list[dict] = [{} for _ in folds]        # each fold's graphs and tables

    def fold_table(f: int, key: tuple[str, str], kept: Sequence[str] = ()) -> QuantTable:
        """Candidate ``key``'s table on fold ``f``, ``kept`` in fp32 besides."""
        rewritten, base = fold_made[f][key[0]]
        base = QuantTable({name: dict(e) for name, e in base.items()},
                          rewrites=base.rewrites, keep_float=base.keep_float)
        return _keeping(table_rewrites[key[1]](rewritten, base), kept)

    def measured(key: tuple[str, str], kept: Sequence[str] = (),
                 layers: bool = False) -> tuple[FidelityReport, QuantTable]:
        """Candidate ``key`` (``kept`` in fp32) on every fold; and its last fold's table."""
        acc = _Accumulator(preset, keep_float, layers)
        for f, (_, test) in enumerate(folds):
            table = fold_table(f, key, kept)
            acc.add(fold_made[f][key[0]][0], table, pick(test))
        return acc.report(check, calibrated_on, folds=n_folds), table

    # every candidate on every fold, compared on the model's outputs
    accs: dict[tuple[str, str], _Accumulator] = {}
    for f, ((cal, test), ranges) in enumerate(zip(folds, fold_ranges, strict=True)):
        for g_name, rewrite in graph_rewrites.items():
            rewritten, _ = fold_made[f][g_name] = calibrated(rewrite, pick(cal), ranges)
            refs = [interpret(rewritten, feeds, keep_all=True) for feeds in pick(test)]
            for t_name in table_rewrites:
                key = g_name, t_name
                acc = accs.setdefault(key, _Accumulator(preset, keep_float, layers=False))
                acc.add(rewritten, fold_table(f, key), pick(test), refs)
    reports = {key: acc.report(check, calibrated_on, folds=n_folds)
               for key, acc in accs.items()}
    best = choose(reports)
    variants = {_candidate_name(*key): score(r) for key, r in reports.items()}
    report, applied = reports[best], _candidate_name(*best)
    # (a table rewrite keeps the layers its calibrated table keeps in fp32)
    kept = output_writers(graph, dla_nodes(graph, preset, keep_float | frozenset(
        fold_made[-1][best[0]][1].keep_float))) if float_outputs else ()
    if kept:        # the best candidate again, its output layers in fp32
        tried, _ = measured(best, kept)
        variants[f"{applied} + {FLOAT_OUTPUTS}"] = score(tried)
        if _gains(report, tried):
            applied = f"{applied} + {FLOAT_OUTPUTS}"
        else:
            kept = ()
    # the one chosen, measured layer by layer too (its outputs measure as they did)
    report, table = measured(best, kept, layers=True)
    report.applied, report.variants = applied, variants
    if check == "held-out":         # one fold: its table is the one measured
        return table, report
    rewritten, table = calibrated(graph_rewrites[best[0]], samples, {})
    return _keeping(table_rewrites[best[1]](rewritten, table), kept), report


def _gains(before: FidelityReport, after: FidelityReport) -> bool:
    """Whether ``after`` scores no worse than ``before`` and either some output's SQNR
    gains at least :data:`FLOAT_OUTPUTS_GAIN_DB` or some int8 output of ``before``
    clipped held-out values.  A clipped output says the calibration inputs did not
    span what new inputs give (a landmark past every calibration face's); the few
    held-out samples weigh such values little, the inputs after them more: the
    landmarks' int8 output clipped on 25 of 51 test faces (one landmark 30 px off)
    while fp32 output layers gained 0.6 dB on the two held-out faces."""
    was = {o.name: o.sqnr_db for o in before.outputs}
    return score(after) >= score(before) and (
        any(o.sqnr_db >= was[o.name] + FLOAT_OUTPUTS_GAIN_DB for o in after.outputs)
        or any(o.clipped > 0 for o in before.outputs))


def _keeping(table: QuantTable, nodes: Sequence[str]) -> QuantTable:
    """``table`` with ``nodes`` added to its ``keep_float`` (in place)."""
    table.keep_float = tuple(sorted({*table.keep_float, *nodes}))
    return table


def output_writers(graph: Graph, nodes: set[str]) -> tuple[str, ...]:
    """The last layers of the DLA's work: those among ``nodes`` (what the DLA runs)
    after which only data movers (:data:`~tengine_host.quant.coarse_outputs.MOVEMENT_OPS`)
    and CPU nodes lead to the model's outputs, with the DLA's movers after them; ``()``
    when one of them reaches a class-score output, or when they do more than
    :data:`FLOAT_OUTPUTS_MAC_SHARE` of the model's multiply-accumulates.

    In int8 their outputs are rounded to a step and saturate past the calibrated range
    before anything reads them: a landmark or box coordinate that a test image puts
    beyond every calibration image's comes out clipped.  In fp32 on the CPU the model
    keeps its DLA subgraphs (these end them) and loses that error.  Class scores are
    left alone: their ranking survives the step, and a classifier's last layer is its
    decision."""
    from tengine_host.partition import node_macs

    readers: dict[str, list] = {}
    for n in graph.nodes:
        for t in dict.fromkeys(n.inputs):
            readers.setdefault(t, []).append(n)
    computes = {n.name for n in graph.nodes if n.name in nodes
                and n.op_type not in MOVEMENT_OPS}
    feeds_dla: dict[str, bool] = {}       # a DLA layer that computes lies downstream
    classes: dict[str, bool] = {}         # a class-score output lies downstream
    for n in reversed(graph.nodes):
        after = [r for t in n.outputs if t for r in readers.get(t, [])]
        feeds_dla[n.name] = any(r.name in computes or feeds_dla[r.name] for r in after)
        classes[n.name] = any(classes[r.name] for r in after) or any(
            t in graph.outputs and is_class_scores(graph, t) for t in n.outputs if t)
    last = [n for n in graph.nodes if n.name in computes and not feeds_dla[n.name]]
    total = sum(node_macs(n, graph) for n in graph.nodes)
    if not last or any(classes[n.name] for n in last) or \
            sum(node_macs(n, graph) for n in last) > FLOAT_OUTPUTS_MAC_SHARE * total:
        return ()
    movers_after = [m for n in last for t in n.outputs if t for m in movers(graph, t)
                    if m in nodes]
    return tuple(dict.fromkeys([*(n.name for n in last), *movers_after]))


def kept_float(graph: Graph, table: QuantTable, preset: str,
               keep_float: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The layers calibration keeps in fp32: those of ``table.coarse_outputs`` the DLA of
    ``preset`` would run (the CPU runs the others in fp32 anyway), with the data movers
    after them (which would requantize), said in a warning."""
    found = getattr(table, "coarse_outputs", {})
    dla = dla_nodes(graph, preset, keep_float) if found else set()
    kept = {name: c for name, c in found.items() if name in dla}
    if kept:
        warnings.warn(describe_coarse(kept), stacklevel=3)
    movers = [m for c in kept.values() for m in c.movers]
    return tuple(dict.fromkeys((*getattr(table, "keep_float", ()), *kept, *movers)))


#: ``--equalize`` / ``--bias-correction`` (and ``--zero-points``): which ways to try
CHOICES = {"auto": (False, True), "on": (True,), "off": (False,)}


def weight_rewrites(preset: str = "nv_small", keep_float: frozenset[str] = frozenset(),
                    equalize: str = "auto", bias_correction: str = "auto",
                    graph: Graph | None = None
                    ) -> dict[str, Callable[[Graph, list], GraphRewrites]]:
    """The weight rewrites to try, as :func:`calibrate_checked`'s ``rewrites``: cross-layer
    equalization and bias correction (of the layers the DLA of ``preset`` runs), each
    ``"auto"`` (with and without, measured), ``"on"`` or ``"off"``.  Equalization comes
    in two kinds, both tried: pairs of layers scaled by their weights, or by their data
    as well (:data:`~tengine_host.quant.rewrites.PAIRS_BY_DATA`).  Given the ``graph``,
    ``"auto"`` does not try equalization where it has no pair of layers or channel group
    to equalize, nor the second kind where it has no pair."""
    from accel.compiler.quantize import quantize_weights
    from tengine_host.quant.rewrites import (
        BIAS_CORRECTION,
        EQUALIZATION,
        PAIRS_BY_DATA,
        equalization,
    )
    from tengine_host.quant.rewrites import bias_correction as corrected_biases

    for option, value in (("equalize", equalize), ("bias_correction", bias_correction)):
        if value not in CHOICES:
            raise ValueError(f"{option}={value!r}; choose one of {', '.join(CHOICES)}")

    # one fp32 pass per calibration set, shared by equalization with and without bias
    # correction; an entry holds its graph and samples, so their ids stay theirs
    equalized: dict[tuple, tuple] = {}

    def equalize_once(graph: Graph, samples: list, pairs: bool) -> GraphRewrites:
        key = (id(graph), pairs, *map(id, samples))
        if key not in equalized:
            equalized[key] = (graph, list(samples), equalization(graph, samples, pairs=pairs))
        return equalized[key][2]

    def make(eq: str | None, bc: bool) -> Callable[[Graph, list], GraphRewrites]:
        def made(graph: Graph, samples: list) -> GraphRewrites:
            base = equalize_once(graph, samples, eq == PAIRS_BY_DATA) if eq else \
                GraphRewrites()
            if not bc:
                return base
            dla = dla_nodes(graph, preset, keep_float)
            return corrected_biases(graph, samples, quantize_weights,
                                    lambda node: node.name in dla, base=base)
        return made

    kinds = [EQUALIZATION, PAIRS_BY_DATA]
    if graph is not None:
        from tengine_host.quant.equalize import find_pairs
        from tengine_host.quant.equalize_groups import channel_groups

        paired = find_pairs(graph)[0]
        if not paired:
            kinds = [EQUALIZATION] if channel_groups(graph) else []
    equalizations = [None] * (False in CHOICES[equalize]) + kinds * (True in CHOICES[equalize])
    if not equalizations:       # "on" where there is nothing to equalize
        equalizations = [EQUALIZATION]
    return {" + ".join(name for name in (eq, BIAS_CORRECTION if bc else None) if name):
            make(eq, bc) for eq in equalizations for bc in CHOICES[bias_correction]}


def _candidate_name(graph_rewrite: str, table_rewrite: str) -> str:
    """"symmetric", "zero points", "equalization", "equalization + zero points", ..."""
    if not graph_rewrite:
        return table_rewrite
    return graph_rewrite if table_rewrite == "symmetric" else f"{graph_rewrite} + {table_rewrite}"


#: ``--keep-float auto`` keeps at most this many layers in fp32
MAX_KEPT_FLOAT = 8


@dataclass
class KeepFloatChoice:
    """What ``--keep-float auto`` chose and what it costs on the DLA."""

    nodes: list[str]                    # kept in fp32, in the order they were added
    table: QuantTable                   # the table with them kept (``keep_float`` set)
    report: FidelityReport              # the held-out check with them kept
    met: bool                           # the fidelity target is met
    dla_subgraphs: tuple[int, int]      # (before, after)
    dla_mac_share: tuple[float, float]  # (before, after)


def choose_keep_float(graph: Graph, table: QuantTable,
                      samples: Sequence[Mapping[str, np.ndarray]], report: FidelityReport, *,
                      preset: str = "nv_small", min_sqnr_db: float = MIN_OUTPUT_SQNR_DB,
                      min_top1: float = MIN_TOP1_AGREEMENT, max_layers: int = MAX_KEPT_FLOAT,
                      progress: bool = True) -> KeepFloatChoice:
    """The fewest layers, most sensitive first (:func:`sensitivity` on ``samples``), to keep
    in fp32 for every output to meet the fidelity target, at most ``max_layers``.

    ``report`` is the check of ``table`` on ``samples`` with every layer on the DLA; each
    layer added is measured again on the same samples.  The table returned records the
    nodes kept (``keep_float``) and drops their bias correction, if any."""
    def kept_table(keep: list[str]) -> QuantTable:
        return QuantTable(table, rewrites=table.rewrites.without_shifts(keep),
                          keep_float=[*table.keep_float, *keep])

    def cost(keep: frozenset[str]) -> tuple[int, float]:
        part = dla_partition(graph, preset, keep)
        return part.subgraph_counts().get("nvdla", 0), part.share("nvdla")[1]

    kept: list[str] = []
    current = report
    met = not current.warnings(min_sqnr_db, min_top1)
    if not met:
        ranked = sensitivity(graph, table, samples, preset=preset, progress=progress,
                             keep_float=frozenset(table.keep_float))
        for layer in ranked[:max_layers]:
            kept.append(layer.name)
            current = measure(graph, kept_table(kept), samples, preset=preset,
                              check=report.check,
                              calibration_samples=report.calibration_samples,
                              keep_float=frozenset([*table.keep_float, *kept]))
            current.applied, current.variants = report.applied, report.variants
            if not current.warnings(min_sqnr_db, min_top1):
                met = True
                break
    before, after = cost(frozenset(table.keep_float)), cost(frozenset([*table.keep_float, *kept]))
    return KeepFloatChoice(kept, kept_table(kept), current, met, (before[0], after[0]),
                           (before[1], after[1]))
