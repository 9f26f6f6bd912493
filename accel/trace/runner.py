"""Run NVIDIA's register-trace tests (``verif/tests/trace_tests``) and judge them.

:func:`run_trace` plays one trace directory (:mod:`accel.trace.script`) on a
backend - the cmodel (:class:`~accel.trace.cmod_player.CmodPlayer` on a
:class:`~accel.cmod.dla.Dla` of the preset named by the parent directory) or the
Amaranth RTL in simulation (:mod:`accel.trace.rtl_player`) - and compares
``zlib.crc32`` of the checked region with the golden value.  Results are
``pass``, ``fail`` or ``skip`` (missing input data, or an operation the model
does not implement) - never pass without a CRC match.

The cmodel models the SDP Y stage on every preset (``Dla(model_y_stage=True)``):
NVIDIA's nv_small ``sdp_*_ew_*`` goldens were produced by a model with Y although
nv_small has no SDP_EW.  A trace that needs it passes only with a CRC match and
carries a ``note`` saying so (``strict=True`` skips it instead).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel.cmod.dla import Dla
from accel.cmod.dram import Dram
from accel.cmod.errors import UnsupportedError
from accel.cmod.records import OpRecord
from accel.config import PRESETS, HwConfig, get_preset
from accel.errors import AccelError, AccelInputError
from accel.trace.cmod_player import CmodPlayer
from accel.trace.script import MalformedTrace, TraceError, find_cfg, parse_cfg

TRACE_BACKENDS = ("cmod", "rtl")
"""Where :func:`run_trace` plays a trace: the cmodel, or the Amaranth RTL in simulation."""


class _Skip(AccelError):
    """Control flow: the trace cannot run here (missing data); reported as *skip*."""


@dataclass
class TraceResult:
    """Outcome of one trace: ``status`` is "pass", "fail" or "skip".

    ``reason`` explains a fail or skip; ``note`` qualifies a result, e.g. a
    unit the preset lacks that was modelled to reproduce the golden.
    """

    name: str
    path: str
    preset: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    cycles: int = 0
    stats: list[OpRecord] = field(default_factory=list)   # every operation run
    note: str = ""
    malformed: bool = False     # failed because the trace itself is bad input


def _preset_of(trace_dir: Path, preset: str | None) -> str:
    if preset is not None:
        get_preset(preset)
        return preset
    name = trace_dir.parent.name
    if name not in PRESETS:
        raise AccelInputError(f"cannot tell the preset of {trace_dir}: parent directory "
                              f"{name!r} is not in {', '.join(PRESETS)}; give --preset NAME")
    return name



def _model(backend: str, cfg: HwConfig, strict: bool):
    """The cmodel's :class:`Dla` a trace plays on (``csb_write``, ``csb_read``, ``dram``,
    ``glb``, ``stats``, ``notes``); the RTL plays traces in a simulation of its own
    (:mod:`accel.trace.rtl_player`)."""
    if backend == "cmod":
        return Dla(cfg, Dram(), model_y_stage=not strict)
    raise ValueError(f"trace backend {backend!r} is not one of {', '.join(TRACE_BACKENDS)}")


def run_trace(path: str | Path, preset: str | None = None,
              hw: HwConfig | None = None, strict: bool = False,
              backend: str = "cmod", simulator: str = "icarus",
              memory: str = "axi", player: Any = None) -> TraceResult:
    """Play the trace in directory ``path`` and check its golden CRC.

    ``hw`` overrides the configuration (e.g. a preset variant with an extra
    unit); by default it is the preset named by ``preset`` or the directory.
    ``strict`` refuses a Y stage the configuration lacks (the trace is then
    skipped as unsupported) instead of modelling it with a note.  ``backend`` is one of
    :data:`TRACE_BACKENDS`; ``simulator`` and ``memory`` apply to ``rtl`` (see
    :func:`accel.trace.rtl_player.play`), whose simulations ``player`` (an
    :class:`accel.trace.rtl_player.TracePlayer` for that simulator and memory) keeps
    for the next traces.
    """
    trace_dir = Path(path)
    t0 = time.perf_counter()
    name = trace_dir.name
    preset_name = _preset_of(trace_dir, preset)
    result = TraceResult(name, str(trace_dir), preset_name, "fail")
    dla = None
    try:
        cfg_path = find_cfg(trace_dir)
        cmds = parse_cfg(cfg_path)
        for cmd in cmds:  # missing inputs make the trace meaningless: skip before running
            if cmd.name == "mem_load" and not (trace_dir / cmd.args[2]).exists():
                raise _Skip(f"missing data: {cmd.args[2]}")
        cfg = hw if hw is not None else get_preset(preset_name)
        if backend == "rtl":
            from accel.trace.rtl_player import play  # Amaranth loads for RTL runs only

            run = player.play(trace_dir, cfg) if player is not None else \
                play(trace_dir, cfg, simulator=simulator, memory=memory)
            result.status = "skip" if run.skipped else "pass" if run.passed else "fail"
            result.reason, result.cycles = run.reason, run.cycles
            if run.skipped:
                result.reason = f"{cfg.name} has no such unit: {run.reason}"
            if run.engine_seconds > 0:
                result.note = (f"{simulator}, {memory} memory: engine ran {run.engine_cycles} "
                               f"cycles at {run.engine_cycles / run.engine_seconds:,.0f} "
                               f"cycles/s")
            result.seconds = time.perf_counter() - t0
            return result
        dla = _model(backend, cfg, strict)
        player = CmodPlayer(cfg_path, dla)
        player.run(cmds)
        if player.checks == 0:
            raise MalformedTrace(f"{cfg_path}: no check_crc statement, nothing was verified")
        result.status = "pass"
    except _Skip as exc:
        result.status, result.reason = "skip", str(exc)
    except UnsupportedError as exc:
        result.status, result.reason = "skip", f"unsupported: {exc}"
    except TraceError as exc:
        result.reason = str(exc)
        result.malformed = isinstance(exc, MalformedTrace)
    except Exception as exc:  # a model bug must not stop a whole run
        result.reason = f"{type(exc).__name__}: {exc}"
    if dla is not None:
        result.stats = dla.stats
        result.cycles = int(sum(op.cycles for op in dla.stats))
        result.note = "; ".join(dla.notes)
    result.seconds = time.perf_counter() - t0
    return result


def find_traces(paths: Iterable[str | Path]) -> list[Path]:
    """Trace directories: each path is a trace dir or a directory of trace dirs."""
    out = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"trace path {str(p)!r} does not exist")
        if not p.is_dir():
            raise FileNotFoundError(f"trace path {str(p)!r} is not a directory (give a trace "
                                    f"directory or a directory of them)")
        if any(p.glob("*.cfg")):
            out.append(p)
            continue
        found = sorted(d for d in p.iterdir() if d.is_dir() and any(d.glob("*.cfg")))
        if not found:
            raise FileNotFoundError(f"no trace under {str(p)!r}: neither it nor its "
                                    f"sub-directories hold a .cfg file")
        out.extend(found)
    return out


def run_traces(paths: Iterable[str | Path], preset: str | None = None,
               progress: Callable[[TraceResult], None] | None = None,
               strict: bool = False, backend: str = "cmod", simulator: str = "icarus",
               memory: str = "axi", announce: Callable[[str], None] | None = None
               ) -> list[TraceResult]:
    """Run every trace under ``paths`` on ``backend``; ``progress`` is called after each one.
    ``simulator`` and ``memory``: of the ``rtl`` backend (:func:`run_trace`), which
    builds and starts the engine's simulation once per configuration for all the
    traces, telling ``announce`` when it starts one."""
    if backend not in TRACE_BACKENDS:
        raise ValueError(f"trace backend {backend!r} is not one of {', '.join(TRACE_BACKENDS)}")
    results = []
    player = None
    if backend == "rtl":
        from accel.trace.rtl_player import TracePlayer  # Amaranth loads for RTL runs only

        player = TracePlayer(simulator, memory, announce=announce)
    try:
        for trace_dir in find_traces(paths):
            res = run_trace(trace_dir, preset, strict=strict, backend=backend,
                            simulator=simulator, memory=memory, player=player)
            results.append(res)
            if progress is not None:
                progress(res)
    finally:
        if player is not None:
            player.close()
    return results
