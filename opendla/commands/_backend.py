"""The ``--backend`` and ``--simulator`` options of the commands that run a DLA
(``demo``, ``run``): the cmodel, or convolutions on the RTL engine in simulation."""

from __future__ import annotations

import argparse

BACKENDS = ("cmod", "rtl")
#: the HDL simulators of ``--backend rtl`` (the same names as :data:`accel.rtl.sim.SIMULATORS`,
#: kept here so that parsing arguments does not import the RTL tool flow)
SIMULATORS = ("icarus", "verilator")


def add_backend_options(p: argparse.ArgumentParser, applies: str = "") -> None:
    """Add ``--backend`` and ``--simulator`` to ``p``; ``applies`` prefixes the help
    with the condition under which they matter (e.g. ``"with --device nvdla: "``)."""
    p.add_argument("--backend", choices=BACKENDS, default="cmod",
                   help=f"{applies}where the DLA's operations run: the cmodel (default), or "
                        "rtl: convolutions on the RTL engine in simulation, each output "
                        "checked against the cmodel's, the rest on the cmodel")
    p.add_argument("--simulator", choices=SIMULATORS, default="icarus",
                   help="HDL simulator of --backend rtl (default icarus)")
