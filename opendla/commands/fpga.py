"""``opendla fpga build``: bitstream of the CMAC self-test with a utilization/Fmax report.

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

from accel.config import DEFAULT_PRESET, PRESETS, get_preset
from opendla.errors import UsageError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fpga", help="FPGA bitstream builds (YoWASP tools)")
    sub = parser.add_subparsers(dest="fpga_command", required=True)
    b = sub.add_parser("build", help="build the MAC-array self-test bitstream and report "
                                     "LUT/FF/DSP/BRAM/Fmax")
    b.add_argument("--board", default="ulx3s-85f", metavar="BOARD",
                   help="target board: " + ", ".join(_boards()) + " (default ulx3s-85f)")
    b.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"hardware configuration (default {DEFAULT_PRESET})")
    b.add_argument("--atomic-c", type=int, help="override MAC_ATOMIC_C_SIZE of the preset")
    b.add_argument("--atomic-k", type=int, help="override MAC_ATOMIC_K_SIZE of the preset")
    b.add_argument("--target-mhz", type=float, default=100.0, help="clock target (default 100)")
    b.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    b.add_argument("-o", "--out", default=None,
                   help="build directory (default build/fpga/<board>-<config>)")
    b.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def _boards() -> list[str]:
    from fpga.boards import BOARDS

    return list(BOARDS)


def _stage_printer():
    """``progress`` for :func:`fpga.build.build`: one line per stage on stderr."""
    start = time.monotonic()

    def report(stage: str) -> None:
        print(f"[{time.monotonic() - start:6.1f} s] {stage}", file=sys.stderr, flush=True)
    return report


def run(args: argparse.Namespace) -> int:
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
    out = args.out or f"build/fpga/{args.board}-{cfg.name}"
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o {out!r}: cannot create the build directory: {exc}") from None
    print(f"building {cfg.name} ({cfg.atomic_c}x{cfg.atomic_k}) for {args.board} in {out} "
          f"(the first run compiles the WASM tools, ~35 s)", file=sys.stderr)
    report = build(args.board, cfg, out, target_mhz=args.target_mhz, seed=args.seed,
                   progress=_stage_printer())
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text(), end="")
    return 0
