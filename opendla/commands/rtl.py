"""``opendla rtl generate|test``: Verilog of the MAC array and its cocotb test."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from accel.config import DEFAULT_PRESET, PRESETS, HwConfig, get_preset
from opendla.commands._backend import add_simulator_option, simulator_of
from opendla.errors import CheckFailed, UsageError
from tengine_host.errors import reason


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("rtl", help="Amaranth RTL: Verilog generation, cocotb tests")
    sub = parser.add_subparsers(dest="rtl_command", required=True)
    g = sub.add_parser("generate", help="write the CMAC Verilog and print its ports")
    g.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"hardware configuration (default {DEFAULT_PRESET})")
    g.add_argument("-o", "--out", default=None,
                   help="output directory (default build/rtl/<preset>)")
    t = sub.add_parser("test", help="simulate the CMAC against the cmodel with cocotb")
    t.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"hardware configuration (default {DEFAULT_PRESET})")
    add_simulator_option(t, "of the cocotb tests")
    t.add_argument("--seed", type=int, default=1, help="seed of the random stimulus")
    t.add_argument("-o", "--out", default=None,
                   help="build directory (default build/rtl/<preset>)")
    t.add_argument("--waves", action="store_true", help="dump waveforms")
    for p in (g, t):
        p.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = get_preset(args.preset)
    out = args.out or f"build/rtl/{cfg.name}"
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"-o {out!r}: cannot create the output directory: "
                         f"{reason(exc, out)}") from None
    if args.rtl_command == "generate":
        return _generate(cfg, out, args.json)
    return _test(cfg, out, args)


def _generate(cfg: HwConfig, out: str, as_json: bool) -> int:
    from accel.rtl.generate import generate_verilog

    path = generate_verilog(cfg, out)
    # The port list generate_verilog wrote beside the Verilog.
    ports = json.loads(path.with_suffix(".ports.json").read_text())
    if as_json:
        print(json.dumps({"verilog": str(path), "ports": ports}, indent=2))
        return 0
    print(path)
    width = max(len(p["name"]) for p in ports)
    for p in ports:
        print(f"  {p['direction']:<6} {p['name']:<{width}}  [{p['width']}]")
    return 0


def _test(cfg: HwConfig, out: str, args: argparse.Namespace) -> int:
    from accel.rtl.sim import SIMULATORS, SimulationFailed, run_cocotb

    if simulator_of(args) not in SIMULATORS:
        raise UsageError(f"--simulator {args.simulator!r} not in {', '.join(SIMULATORS)}")
    try:
        summary = run_cocotb(cfg, out, simulator=args.simulator, seed=args.seed,
                             waves=args.waves)
    except FileNotFoundError as err:
        raise UsageError(f"--simulator {args.simulator}: {err}") from None
    except SimulationFailed as err:
        raise CheckFailed(f"the cocotb test failed: {err}") from None
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{cfg.name}: PASS on {args.simulator}, {summary['tests']} cocotb tests, "
              f"{summary['vectors']} vectors checked against accel.cmod.cmac.mac_atoms, "
              f"{summary.get('cycles', 0):,} cycles simulated in {summary['test_s']} s "
              f"({summary.get('cycles_per_s', 0):,} cycles/s), {summary['wall_s']} s wall "
              f"with the build")
    return 0
