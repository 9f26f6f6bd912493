"""Verilog generation for the RTL components, parameterized only by ``HwConfig``.

Every width in the generated Verilog follows from the configuration through
the component's signature, so nothing is written twice by hand.  Besides the
Verilog, :func:`generate_verilog` writes ``<top>.ports.json`` (port name,
direction, width) and ``<top>.config.json`` (the ``HwConfig`` knobs it was
built from), which is what testbenches and board tops read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Module, ResetSignal, Shape, Signal
from amaranth.lib import wiring

from accel.config import HwConfig
from accel.rtl.cacc import Accumulator
from accel.rtl.cmac import Cmac
from accel.rtl.conv_core import ConvCore
from accel.rtl.conv_engine import ConvEngine
from accel.rtl.csb_regs import CsbRegisterFile
from accel.rtl.postproc import PostProcessor
from accel.rtl.toolchain import yowasp_env
from accel.rtl.uart import RamEngine

#: memory entries (feature and weight) of the ``engine_traces`` top: NVIDIA's
#: direct-convolution traces and the runtime's convolutions fit (nv_small's CBUF)
TRACE_ENTRIES = 16384

#: the units beside the convolution in the simulation tops
#: (:data:`accel.rtl.conv_engine.OTHER_UNITS`), and per-element operands for convolutions
SIM_OTHERS = ("pdp", "sdp_memory", "cdp", "elements")


def sim_others(cfg: HwConfig) -> tuple[str, ...]:
    """The units beside the convolution in ``cfg``'s simulation tops: :data:`SIM_OTHERS`
    where they are built and verified - nv_small's shape, 8-byte atoms and 8-kernel groups
    (a lane a cycle, nv_small's PDP, SDP and CDP throughput) - and none elsewhere, where
    the engine is the convolution alone."""
    return SIM_OTHERS if cfg.atom_size == 8 and cfg.atomic_k == 8 else ()

#: bytes of the ``engine_ram`` top's RAM: every nv_small direct-convolution trace's memory
RAM_ENGINE_BYTES = 1 << 20

class RegisteredReset(wiring.Component):
    """``inner`` with its reset a register behind the ``rst`` port, a cycle late: the same
    ports, the same behaviour a cycle after reset.

    A simulation top, for Verilator: Amaranth resets synchronously, so every register's
    next value depends on ``rst``; with ``rst`` a top-level input, Verilator evaluates
    all that logic again at every ``eval`` (its input region, about a third of the
    engine's simulation time).  Behind a register, the reset is state like any other.
    A testbench holds ``rst`` for two cycles and waits one more after releasing it.
    """

    def __init__(self, inner: wiring.Component) -> None:
        self.inner = inner
        super().__init__(inner.signature)

    def elaborate(self, platform) -> Module:
        m = Module()
        rst = Signal(reset_less=True)
        m.d.sync += rst.eq(ResetSignal("sync"))
        m.domains.inner = ClockDomain("inner", local=True)
        m.d.comb += [ClockSignal("inner").eq(ClockSignal("sync")),
                     ResetSignal("inner").eq(rst)]
        m.submodules.inner = DomainRenamer("inner")(self.inner)
        wiring.connect(m, wiring.flipped(self), self.inner)
        return m


#: Top-level component name -> constructor from a config.
TOPS: dict[str, Callable[[HwConfig], wiring.Component]] = {
    "cmac": Cmac,
    "postproc": PostProcessor,
    "cacc": Accumulator,
    "conv": ConvCore,
    "csb": lambda cfg: CsbRegisterFile(),
    # the register file as the simulation tops have it (one decoder, the same cycles)
    "csb_decoded": lambda cfg: CsbRegisterFile(per_register=False),
    "engine": ConvEngine,
    # memories large enough for NVIDIA's direct-convolution traces, PDP and SDP from memory
    "engine_traces": lambda cfg: RegisteredReset(ConvEngine(
        cfg, feature_entries=TRACE_ENTRIES, weight_entries=TRACE_ENTRIES,
        others=sim_others(cfg))),
    # the engine on the board's block RAM, loaded through a port of its own: traces whose
    # memory traffic never leaves the simulator (the fast way to simulate the engine)
    "engine_ram": lambda cfg: RegisteredReset(RamEngine(
        cfg, ram_bytes=RAM_ENGINE_BYTES, engine_entries=TRACE_ENTRIES,
        others=sim_others(cfg))),
    # the CMAC as the ECP5 build has it, multiplying in MULT18X18D instances (simulated
    # with a model of the primitive: tests/rtl/mult18x18d_model.v)
    "cmac_ecp5": lambda cfg: Cmac(cfg, ecp5_dsp=True),
    # the post-processing pipeline as the ECP5 build has it, its products in MULT18X18D
    # instances (the same model)
    "postproc_ecp5": lambda cfg: PostProcessor(cfg, ecp5_dsp=True),
    # the conv core with both (the CMAC's shadow kernels in the blocks' weight registers)
    "conv_ecp5": lambda cfg: ConvCore(cfg, ecp5_dsp=True),
}


@dataclass(frozen=True)
class Port:
    """One port of a generated module."""

    name: str
    direction: str  # "input" or "output"
    width: int


def make_top(cfg: HwConfig, top: str = "cmac",
             factory: Callable[[HwConfig], wiring.Component] | None = None) -> wiring.Component:
    """Build the component called ``top``; the error lists the valid names.

    ``factory`` builds a top this package does not know (e.g. the FPGA build's
    bridged core, :func:`fpga.bridge.simulation_top`), named ``top``; the
    accelerator's RTL does not import the board code, so the board code passes it in.
    """
    if factory is not None:
        return factory(cfg)
    try:
        ctor = TOPS[top]
    except KeyError:
        raise ValueError(f"top {top!r} not in {', '.join(TOPS)}") from None
    return ctor(cfg)


def port_list(component: wiring.Component) -> list[Port]:
    """Ports as Amaranth names them in Verilog: member paths joined with ``__``,
    plus the ``clk``/``rst`` of the sync domain."""
    ports = []
    for path, member, _value in component.signature.flatten(component):
        direction = "input" if member.flow == wiring.In else "output"
        name = "__".join(str(p) for p in path)
        ports.append(Port(name, direction, Shape.cast(member.shape).width))
    return ports + [Port("clk", "input", 1), Port("rst", "input", 1)]


def generate_verilog(cfg: HwConfig, out_dir: str | Path, top: str = "cmac",
                     factory: Callable[[HwConfig], wiring.Component] | None = None) -> Path:
    """Write ``<out_dir>/<top>.v`` for ``cfg`` and return its path.

    Parameters
    ----------
    cfg : HwConfig
        Configuration whose sizes (``atomic_c``, ``atomic_k``...) shape the module.
    out_dir : path
        Created if missing.
    top : str
        Component to generate, a key of :data:`TOPS`; also the module name.
    factory : callable, optional
        Builds the component instead of :data:`TOPS` (see :func:`make_top`).

    Returns
    -------
    Path of the Verilog file.  ``<top>.ports.json`` and ``<top>.config.json``
    are written beside it.
    """
    component = make_top(cfg, top, factory)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with yowasp_env(("YOSYS",)):
        text = verilog.convert(component, name=top, emit_src=False)
    path = out / f"{top}.v"
    path.write_text(text)
    ports = [dataclasses.asdict(p) for p in port_list(component)]
    (out / f"{top}.ports.json").write_text(json.dumps(ports, indent=1) + "\n")
    (out / f"{top}.config.json").write_text(
        json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    return path


def clocked_top(verilog: Path, top: str, clock_ns: int) -> Path:
    """Write ``<top>_clocked.v`` beside ``verilog``: a module of that name holding ``top``
    with its clock made inside, a ``clk`` register toggled every ``clock_ns / 2`` time
    units, and every other port passed through under its own name; and its
    ``.ports.json``, where ``clk`` is an output (a testbench awaits its edges, nothing
    drives it).  A simulation of this top runs without a testbench clock (cocotb writing
    ``clk`` through VPI twice a cycle).  Returns the path of the Verilog."""
    if clock_ns < 2 or clock_ns % 2:
        raise ValueError(f"clock period {clock_ns} must be an even number of time units")
    ports = json.loads(verilog.with_name(f"{top}.ports.json").read_text())
    if {"name": "clk", "direction": "input", "width": 1} not in ports:
        raise ValueError(f"{top} has no 1-bit clk input to generate")
    passed = [p for p in ports if p["name"] != "clk"]
    name = f"{top}_clocked"
    lines = [f"module {name}({', '.join(p['name'] for p in passed)});"]
    for p in passed:
        width = f" [{p['width'] - 1}:0]" if p["width"] > 1 else ""
        lines.append(f"  {p['direction']}{width} {p['name']};")
    lines += ["  reg clk = 1'b0;", f"  always #{clock_ns // 2} clk = ~clk;",
              f"  {top} inner (", "    .clk(clk),"]
    lines += [f"    .{p['name']}({p['name']}){',' if i < len(passed) - 1 else ''}"
              for i, p in enumerate(passed)]
    lines += ["  );", "endmodule"]
    path = verilog.with_name(f"{name}.v")
    path.write_text("\n".join(lines) + "\n")
    clk = {"name": "clk", "direction": "output", "width": 1}
    path.with_suffix(".ports.json").write_text(json.dumps([*passed, clk], indent=1) + "\n")
    return path


def config_from_json(text: str) -> HwConfig:
    """Inverse of the ``<top>.config.json`` dump (used by the cocotb testbench)."""
    return HwConfig(**json.loads(text))
