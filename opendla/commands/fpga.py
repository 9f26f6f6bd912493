"""``opendla fpga build``: a bitstream (the CMAC self-test, or the conv engine with its
memory and a UART bridge) with a utilization/Fmax report; ``opendla fpga run``: a
loadable whose convolutions run on the board's engine, driven over that UART.

Each stage of the flow (elaboration, yosys, nextpnr, ecppack) is reported on
stderr as it starts, with the time since the build began.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from accel.config import DEFAULT_PRESET, PRESETS, get_preset
from fpga.protocol import BAUD
from opendla.errors import CheckFailed, UsageError
from tengine_host.errors import reason


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fpga", help="FPGA bitstream builds (YoWASP tools)")
    sub = parser.add_subparsers(dest="fpga_command", required=True)
    b = sub.add_parser("build", help="build a bitstream (MAC-array self-test or the conv "
                                     "engine) and report LUT/FF/DSP/BRAM/Fmax")
    b.add_argument("--board", default="ulx3s-85f", metavar="BOARD",
                   help="target board: " + ", ".join(_boards()) + " (default ulx3s-85f)")
    b.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"hardware configuration (default {DEFAULT_PRESET})")
    b.add_argument("--atomic-c", type=int, help="override MAC_ATOMIC_C_SIZE of the preset")
    b.add_argument("--atomic-k", type=int, help="override MAC_ATOMIC_K_SIZE of the preset")
    b.add_argument("--target-mhz", type=float, default=100.0, help="clock target (default 100)")
    b.add_argument("--seed", type=int, default=1,
                   help="nextpnr placement seed (the next seeds, up to two, if its placement "
                        "leaves an arc without any route)")
    b.add_argument("-o", "--out", default=None,
                   help="build directory (default build/fpga/<board>-<config>)")
    b.add_argument("--design", choices=_designs(), default="cmac-selftest",
                   help="cmac-selftest: the MAC array fed by an LFSR (default); engine: the "
                        "conv engine with its memory in block RAM and a UART bridge for "
                        "'opendla fpga run'; engine-small: the same engine with 4 KiB of RAM "
                        "and 256-entry memories (a build of a few minutes); engine-full: "
                        "the engine with the PDP, SDP reading memory, CDP and "
                        "per-element operands (not yet timed for 100 MHz; 'fpga run "
                        "--design engine-full' sends it those operations too)")
    b.add_argument("--no-timing-driven", dest="timing_driven", action="store_false",
                   help="place and route for wire length only: about a third faster, a "
                        "lower Fmax (for checking that a design builds and what it uses)")
    b.add_argument("--synth-only", dest="place", action="store_false",
                   help="stop after synthesis: yosys's cell counts (LUT4, FF, DSP, BRAM), no "
                        "placement, Fmax or bitstream (a fifth of the conv engine's build)")
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    r = sub.add_parser(
        "run", help="run a loadable with what the board's engine implements on the board "
                    "(built with --design engine: its convolutions; engine-full: also PDP, "
                    "SDP from memory and CDP), the rest on the cmodel; every board output is "
                    "checked against the cmodel's")
    r.add_argument("loadable", help="NVDLA loadable (opendla compile)")
    r.add_argument("--port", required=True,
                   help="the board's UART: a serial device (/dev/ttyUSB0) or a pyserial URL "
                        "(socket://HOST:PORT)")
    r.add_argument("--baud", type=int, default=BAUD, help=f"UART rate (default {BAUD})")
    r.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"the configuration the board was built with (default {DEFAULT_PRESET})")
    r.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE",
                   help="int8 input array (.npy/.npz), repeatable; as 'opendla run' takes them")
    r.add_argument("--timeout", type=float, default=5.0, metavar="S",
                   help="seconds to wait for an answer or an interrupt (default 5)")
    r.add_argument("--save-outputs", metavar="DIR", help="write each output as DIR/<name>.npy")
    r.add_argument("--design", choices=("engine", "engine-full"), default="engine",
                   help="the design the board was built with (fpga build --design; default "
                        "engine): what it is sent")
    r.add_argument("--json", action="store_true", help="print a JSON summary")


def _boards() -> list[str]:
    from fpga.boards import BOARDS

    return list(BOARDS)


def _designs() -> tuple[str, ...]:
    from fpga.build import DESIGNS

    return DESIGNS


def _stage_printer():
    """``progress`` for :func:`fpga.build.build`: one line per stage on stderr."""
    start = time.monotonic()

    def report(stage: str) -> None:
        print(f"[{time.monotonic() - start:6.1f} s] {stage}", file=sys.stderr, flush=True)
    return report


def run(args: argparse.Namespace) -> int:
    if args.fpga_command == "run":
        return run_board(args)
    return run_build(args)


def run_build(args: argparse.Namespace) -> int:
    """``opendla fpga build``."""
    from fpga.boards import BOARDS
    from fpga.build import build

    if args.board not in BOARDS:
        raise UsageError(f"--board {args.board!r} not in {', '.join(BOARDS)}")
    cfg = get_preset(args.preset)
    changes = {}
    if args.atomic_c is not None:
        changes.update(mac_atomic_c_size=args.atomic_c,
                       memory_atomic_size=min(cfg.memory_atomic_size, args.atomic_c))
    if args.atomic_k is not None:
        changes["mac_atomic_k_size"] = args.atomic_k
    if changes:
        try:
            cfg = dataclasses.replace(
                cfg, name=f"{cfg.name}-c{changes.get('mac_atomic_c_size', cfg.atomic_c)}"
                          f"k{changes.get('mac_atomic_k_size', cfg.atomic_k)}", **changes)
        except ValueError as err:
            raise UsageError(f"--atomic-c/--atomic-k: {err}") from None
    suffix = "" if args.design == "cmac-selftest" else f"-{args.design}"
    out = args.out or f"build/fpga/{args.board}-{cfg.name}{suffix}"
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o {out!r}: cannot create the build directory: "
                         f"{reason(exc, out)}") from None
    print(f"building {cfg.name} ({cfg.atomic_c}x{cfg.atomic_k}) for {args.board} in {out} "
          f"(the first run compiles the WASM tools, ~35 s)", file=sys.stderr)
    report = build(args.board, cfg, out, target_mhz=args.target_mhz, seed=args.seed,
                   design=args.design, timing_driven=args.timing_driven, place=args.place,
                   progress=_stage_printer())
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text(), end="")
    return 0


#: what ``fpga run`` calls each kind of operation (:attr:`accel.backends.rtl.RtlDla.rtl_kinds`)
_KIND_NAMES = {"conv": "convolutions", "pdp": "PDP operations",
               "sdp": "SDP operations from memory", "cdp": "CDP operations"}


def run_board(args: argparse.Namespace) -> int:
    """``opendla fpga run``: see the module docstring and :mod:`fpga.host`."""
    from accel.backends.rtl import RtlBackend, RtlError, RtlMismatch
    from accel.backends.session import LoadableSession
    from accel.loadable.io import LoadableError
    from accel.runtime.errors import RuntimeFault
    from fpga.host import BoardPlayer, open_link
    from fpga.protocol import BridgeClient
    from opendla.commands.run import loadable_feeds, save_outputs, summarize

    if args.baud <= 0:
        raise UsageError(f"--baud {args.baud}: must be positive")
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout}: must be positive")
    try:
        blob = Path(args.loadable).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read loadable {args.loadable!r}: "
                         f"{reason(exc, args.loadable)}") from None
    cfg = get_preset(args.preset)
    try:
        link = open_link(args.port, args.baud, args.timeout)
    except RtlError as exc:
        raise UsageError(str(exc)) from None
    player = BoardPlayer(BridgeClient(link), timeout_s=args.timeout, design=args.design)
    backend = None
    start = time.perf_counter()
    try:
        backend = RtlBackend(cfg, player=player)    # reads the board's register groups
        sess = LoadableSession(blob, cfg, backend=backend)
        samples, _ = loadable_feeds(args.loadable, args.input, sess.inputs)
        runs = [sess.run(s) for s in samples]
        outputs = {n: np.concatenate([r[n] for r in runs]) for n in runs[0]}
    except RtlMismatch as exc:
        raise CheckFailed(f"the board's output differs from the cmodel's: {exc}") from None
    except RtlError as exc:
        raise CheckFailed(f"the board failed: {exc}") from None
    except (LoadableError, RuntimeFault) as exc:     # the board's own faults are RtlErrors
        raise UsageError(f"cannot run loadable {args.loadable!r}: {exc}") from exc
    finally:
        if backend is not None:
            backend.close()
        link.close()
    seconds = time.perf_counter() - start
    dla = backend.dla
    if args.save_outputs:
        save_outputs(args.save_outputs, outputs)
    summary = {"loadable": args.loadable, "port": args.port, "preset": args.preset,
               "design": args.design, "board_convolutions": dla.rtl_kinds.get("conv", 0),
               "board_operations": dict(dla.rtl_kinds), "cmodel_operations": dla.fallbacks,
               "bytes_sent": player.bytes_sent, "bytes_read": player.bytes_read,
               "seconds": round(seconds, 3), "bit_exact": True,
               "outputs": [summarize(n, v, 5) for n, v in outputs.items()]}
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"{args.loadable} on the board at {args.port} ({args.preset}), "
          f"{len(samples)} sample(s) in {seconds:.2f} s")
    done = ", ".join(f"{n} {_KIND_NAMES.get(k, k)}" for k, n in dla.rtl_kinds.items())
    print(f"  on the board's engine ({args.design}): {done or 'nothing'}, each output equal "
          f"to the cmodel's ({player.bytes_sent:,} bytes sent, {player.bytes_read:,} read)")
    for why, count in sorted(dla.fallbacks.items()):
        print(f"  {count} on the cmodel: {why}")
    for s in summary["outputs"]:
        print(f"  output {s['name']}: shape {s['shape']}")
    return 0
