"""``opendla trace run PATH...``: play NVDLA register-level trace tests on the cmodel
(``--backend rtl``: on the RTL conv engine in simulation)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from accel.config import PRESETS
from opendla.commands._backend import add_simulator_option, simulator_of
from opendla.errors import CheckFailed, UsageError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("trace", help="run NVDLA trace tests on the register-level model")
    sub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    r = sub.add_parser("run", help="play traces and check their golden CRCs")
    r.add_argument("paths", nargs="+", metavar="PATH",
                   help="a trace directory, or a directory of trace directories")
    r.add_argument("--preset", choices=list(PRESETS),
                   help="hardware preset (default: the trace's parent directory name)")
    r.add_argument("--backend", choices=("cmod", "rtl"), default="cmod",
                   help="play on the cmodel (default) or on the RTL conv engine in simulation "
                        "(direct-convolution traces; slow: minutes for large ones)")
    add_simulator_option(r, "of --backend rtl")
    r.add_argument("--memory", choices=("axi", "ram"), default="axi",
                   help="--backend rtl: the engine's memory is served over AXI by the "
                        "testbench (cocotbext-axi, default), or ram: the board's block RAM in "
                        "the design, loaded before the engine runs (fast)")
    r.add_argument("--json", action="store_true", help="print results as JSON")
    r.add_argument("--strict", action="store_true",
                   help="skip traces that program units the preset lacks instead of modelling "
                        "them (nv_small's SDP_EW traces)")
    r.add_argument("-v", "--ops", action="store_true",
                   help="also list every operation with its cycle estimate "
                        "(model: accel.cmod.perf)")


def _row(res) -> str:
    """The result line; a long reason or note continues, whole, on indented lines."""
    reason = res.reason or getattr(res, "note", "")
    head = f"{res.name:<46} {res.status:<5} {res.seconds:8.3f} {res.cycles:>10}"
    if len(reason) <= 60:
        return f"{head} {reason}".rstrip()
    return head + "\n" + textwrap.indent(textwrap.fill(reason, 96), "    ")


def _op_rows(res) -> list[str]:
    rows = []
    for op in res.stats:
        extra = {k: op.details[k] for k in ("mac_atoms", "method", "splits", "local_size", "lut")
                 if k in op.details}
        rows.append(f"    {op.unit:<5} shape={op.shape} cycles={op.cycles}"
                    + "".join(f" {k}={v}" for k, v in extra.items()))
    return rows


def run(args: argparse.Namespace) -> int:
    from accel.trace.runner import find_traces, run_traces

    backend = getattr(args, "backend", "cmod")
    if backend != "rtl" and (getattr(args, "simulator", None) is not None
                             or getattr(args, "memory", "axi") != "axi"):
        raise UsageError("--simulator and --memory choose how --backend rtl simulates the "
                         "engine; the cmodel (--backend cmod) has neither")
    try:
        traces = find_traces(args.paths)       # a path with no trace is an error, not a pass
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    progress = None
    if not args.json:
        print(f"{'trace':<46} {'result':<5} {'seconds':>8} {'cycles':>10} reason/note")
        ops = getattr(args, "ops", False)

        def progress(res) -> None:
            print(_row(res), flush=True)
            if ops and res.stats:
                print("\n".join(_op_rows(res)), flush=True)
    results = run_traces(traces, preset=args.preset, progress=progress,
                         strict=getattr(args, "strict", False),
                         backend=getattr(args, "backend", "cmod"),
                         simulator=simulator_of(args) if backend == "rtl" else "icarus",
                         memory=getattr(args, "memory", "axi"),
                         announce=lambda text: print(text, file=sys.stderr, flush=True))
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
    if args.json:
        print(json.dumps({"results": [
            {"name": r.name, "path": r.path, "preset": r.preset, "result": r.status,
             "reason": r.reason, "note": r.note, "seconds": round(r.seconds, 4), "cycles": r.cycles,
             "ops": [op.as_dict() for op in r.stats]}
            for r in results], "summary": counts}, indent=2))
    else:
        total = sum(r.seconds for r in results)
        noted = sum(bool(r.note) for r in results if r.status == "pass")
        print(f"{counts['pass']} passed"
              + (f" ({noted} with a note)" if noted else "")
              + f", {counts['fail']} failed, {counts['skip']} skipped in {total:.2f} s")
    malformed = [r for r in results if r.malformed]
    if malformed:       # bad input outranks a failed check: the run checked nothing there
        raise UsageError(f"{len(malformed)} trace(s) are malformed (see above): "
                         + ", ".join(r.name for r in malformed))
    if counts["fail"]:
        raise CheckFailed(f"{counts['fail']} trace(s) failed: "
                          + ", ".join(r.name for r in results if r.status == "fail"))
    return 0
