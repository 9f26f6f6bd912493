"""The ``--backend`` and ``--simulator`` options of the commands that run a DLA
(``demo``, ``run``): the cmodel, or convolutions on the RTL engine in simulation."""

from __future__ import annotations

import argparse
import sys

BACKENDS = ("cmod", "rtl")
#: the HDL simulators of ``--backend rtl`` (the same names as :data:`accel.rtl.sim.SIMULATORS`,
#: kept here so that parsing arguments does not import the RTL tool flow)
SIMULATORS = ("icarus", "verilator")


def add_backend_options(p: argparse.ArgumentParser, applies: str = "") -> None:
    """Add ``--backend`` and ``--simulator`` to ``p``; ``applies`` prefixes the help
    with the condition under which they matter (e.g. ``"with --device nvdla: "``)."""
    p.add_argument("--backend", choices=BACKENDS, default="cmod",
                   help=f"{applies}where the DLA's operations run: the cmodel (default), or "
                        "rtl: convolutions and PDP operations on the RTL engine in "
                        "simulation, each output "
                        "checked against the cmodel's, the rest on the cmodel")
    add_simulator_option(p, "of --backend rtl")


def add_simulator_option(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--simulator`` (the HDL simulator ``what``) to ``p``, resolved by
    :func:`simulator_of`."""
    p.add_argument("--simulator", choices=SIMULATORS, default=None,
                   help=f"HDL simulator {what} (default verilator when it is installed, "
                        "else icarus, saying so)")


def simulator_of(args: argparse.Namespace) -> str:
    """``--simulator`` as given, else Verilator when it is installed, else Icarus with a
    note on stderr saying why (``args.simulator`` is set to the choice)."""
    if args.simulator is None:
        from accel.rtl.sim import default_simulator

        args.simulator, note = default_simulator()
        if note:
            print(f"note: {note}", file=sys.stderr)
    return args.simulator
