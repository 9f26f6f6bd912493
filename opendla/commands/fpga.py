"""``opendla fpga build``: bitstream of the CMAC self-test with a utilization/Fmax report."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from accel.config import DEFAULT_PRESET, PRESETS, get_preset


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fpga", help="FPGA bitstream builds (YoWASP tools)")
    sub = parser.add_subparsers(dest="fpga_command", required=True)
    b = sub.add_parser("build", help="build the MAC-array self-test bitstream and report "
                                     "LUT/FF/DSP/BRAM/Fmax")
    b.add_argument("--board", default="ulx3s-85f", help="target board (default ulx3s-85f)")
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


def run(args: argparse.Namespace) -> int:
    from fpga.boards import BOARDS
    from fpga.build import build

    if args.board not in BOARDS:
        print(f"error: board {args.board!r} not in {', '.join(BOARDS)}", file=sys.stderr)
        return 2
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
            print(f"error: {err}", file=sys.stderr)
            return 2
    out = args.out or f"build/fpga/{args.board}-{cfg.name}"
    print(f"building {cfg.name} ({cfg.atomic_c}x{cfg.atomic_k}) for {args.board} in {out} "
          f"(first run compiles the WASM tools, ~35 s)...", file=sys.stderr)
    report = build(args.board, cfg, out, target_mhz=args.target_mhz, seed=args.seed)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text(), end="")
    return 0
