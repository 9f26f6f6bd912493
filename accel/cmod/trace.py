"""Player for NVDLA's register-level trace tests (``verif/tests/trace_tests``).

A trace directory ``<preset>/<name>/`` holds ``<name>.cfg``, a script of
``mem_init``, ``mem_load`` (``.dat`` packet files), ``reg_write`` by symbolic
register name, ``poll_reg_equal``, ``intr_notify``, ``check_crc`` and
``check_nothing`` commands, and the ``.dat`` files.  :func:`run_trace` plays
it on a :class:`~accel.cmod.dla.Dla` of the preset named by the parent
directory and compares ``zlib.crc32`` of the checked region with the golden
value.  Results are ``pass``, ``fail`` or ``skip`` (missing input data, or an
operation the model does not implement) - never pass without a CRC match.

The player models the SDP Y stage on every preset (``Dla(model_y_stage=True)``):
NVIDIA's nv_small ``sdp_*_ew_*`` goldens were produced by a model with Y although
nv_small has no SDP_EW.  A trace that needs it passes only with a CRC match and
carries a ``note`` saying so (``strict=True`` skips it instead).
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accel.cmod.dla import Dla
from accel.cmod.dram import Dram, DramAccessError
from accel.cmod.errors import ConfigError, UnsupportedError
from accel.cmod.glb import status_bit
from accel.cmod.records import OpRecord
from accel.config import PRESETS, HwConfig, get_preset
from accel.errors import AccelError, AccelInputError
from accel.regs import UnknownRegisterError, lookup

_STMT = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*;?\s*$")
_PACKET = re.compile(r"\{\s*offset\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*size\s*:\s*(\d+)\s*,"
                     r"\s*payload\s*:\s*([^}]*)\}")


TRACE_BACKENDS = ("cmod", "rtl")
"""Where :func:`run_trace` plays a trace: the cmodel, or the Amaranth RTL in simulation."""


class TraceError(AccelError):
    """A trace statement that failed (a CRC, a read, an interrupt); the message starts
    with ``file:line``."""


class MalformedTrace(TraceError, AccelInputError):
    """A trace that cannot be played as written: unparsable, an unknown command or
    register, a bad number, no ``.cfg`` or several, nothing to check.  Bad input, not a
    failed check (``opendla trace run`` exits 2 for it, 1 for a failed check)."""


class _Skip(AccelError):
    """Control flow: the trace cannot run here (missing data); reported as *skip*."""


@dataclass
class Command:
    """One statement of a trace ``.cfg``."""

    name: str
    args: list[str]
    line: int


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


def parse_cfg(path: Path) -> list[Command]:
    """Statements of a trace ``.cfg`` (comments and blank lines dropped)."""
    cmds = []
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        text = raw.split("//", 1)[0].strip()
        if not text:
            continue
        m = _STMT.match(text)
        if m is None:
            raise MalformedTrace(f"{path}:{n}: cannot parse {raw.strip()!r}")
        args = [a.strip().strip('"') for a in m.group(2).split(",")] if m.group(2).strip() else []
        cmds.append(Command(m.group(1), args, n))
    return cmds


def parse_dat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A ``.dat`` packet file as ``(offsets, bytes)``: byte i goes to offset ``offsets[i]``.

    NVIDIA's files write every payload byte as ``0x..``: when each packet holds as
    many of those as its size says, all payloads are decoded in one pass; anything
    else goes packet by packet (:func:`_parse_packets`), which names a bad packet.
    """
    text = Path(path).read_text()
    packets = _PACKET.findall(text)
    if not packets:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8)
    offs, sizes, payloads = zip(*packets, strict=True)
    sizes = np.array(sizes, dtype=np.int64)
    if not np.array_equal(np.array([p.count("0x") for p in payloads]), sizes):
        return _parse_packets(path, text)
    hexdigits = "".join(payloads).replace("0x", "")
    try:
        data = bytes.fromhex(hexdigits.replace(",", " "))
    except ValueError:
        return _parse_packets(path, text)
    if len(data) != int(sizes.sum()):
        return _parse_packets(path, text)
    starts = np.array([int(off, 0) for off in offs], dtype=np.int64)
    # byte j of packet i lands at starts[i] + j: the packet's start minus the bytes
    # before it, repeated over its bytes, plus the running byte index
    first = np.cumsum(sizes) - sizes
    offsets = np.repeat(starts - first, sizes) + np.arange(len(data), dtype=np.int64)
    return offsets, np.frombuffer(data, dtype=np.uint8)


def _parse_packets(path: Path, text: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`parse_dat` one packet at a time, checking each packet's size."""
    offs, chunks = [], []
    for m in _PACKET.finditer(text):
        hexdigits = "".join(m.group(3).replace("0x", "").replace(",", " ").split())
        try:
            payload = bytes.fromhex(hexdigits)
        except ValueError as exc:
            raise MalformedTrace(f"{path}: packet at offset {m.group(1)}: bad payload "
                             f"({exc})") from None
        if len(payload) != int(m.group(2)):
            raise MalformedTrace(f"{path}: packet at offset {m.group(1)} declares size "
                                 f"{m.group(2)} but carries {len(payload)} bytes")
        offs.append(np.arange(len(payload), dtype=np.int64) + int(m.group(1), 0))
        chunks.append(payload)
    if not chunks:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8)
    return np.concatenate(offs), np.frombuffer(b"".join(chunks), dtype=np.uint8)


def parse_int(text: str) -> int:
    """A number of a trace statement (``0x..`` or decimal)."""
    return int(text, 0)


def _preset_of(trace_dir: Path, preset: str | None) -> str:
    if preset is not None:
        get_preset(preset)
        return preset
    name = trace_dir.parent.name
    if name not in PRESETS:
        raise AccelInputError(f"cannot tell the preset of {trace_dir}: parent directory "
                              f"{name!r} is not in {', '.join(PRESETS)}; give --preset NAME")
    return name


def find_cfg(trace_dir: Path) -> Path:
    """The ``.cfg`` of a trace directory: ``<name>.cfg``, else its only ``.cfg``."""
    cfg = trace_dir / f"{trace_dir.name}.cfg"
    if cfg.exists():
        return cfg
    cfgs = sorted(trace_dir.glob("*.cfg"))
    if len(cfgs) != 1:
        raise MalformedTrace(f"{trace_dir}: expected one .cfg file (or {cfg.name}), found "
                             f"{len(cfgs)}")
    return cfgs[0]


class _Player:
    def __init__(self, cfg_path: Path, dla: Dla) -> None:
        self.cfg_path, self.dla, self.dram = cfg_path, dla, dla.dram
        self.done: set[str] = set()
        self.checks = 0

    def where(self, cmd: Command) -> str:
        return f"{self.cfg_path}:{cmd.line}"

    def run(self, cmds: list[Command]) -> None:
        for cmd in cmds:
            handler = getattr(self, f"do_{cmd.name}", None)
            if handler is None:
                raise MalformedTrace(f"{self.where(cmd)}: unknown trace command {cmd.name!r}")
            try:
                handler(cmd)
            except (UnknownRegisterError, DramAccessError, ConfigError) as exc:
                raise MalformedTrace(f"{self.where(cmd)}: {exc}") from exc
            except (ValueError, IndexError, KeyError) as exc:
                if cmd.name == "reg_write":  # raised by the model itself: a model bug
                    raise
                raise MalformedTrace(f"{self.where(cmd)}: malformed {cmd.name}"
                                     f"({', '.join(cmd.args)}): {exc}") from exc

    def do_mem_init(self, cmd: Command) -> None:
        pattern = cmd.args[3] if len(cmd.args) > 3 else "ALL_ZERO"
        if pattern != "ALL_ZERO":
            raise UnsupportedError(f"mem_init pattern {pattern} is not supported")
        self.dram.map(parse_int(cmd.args[1]), parse_int(cmd.args[2]), cmd.args[0])

    def do_mem_load(self, cmd: Command) -> None:
        base = parse_int(cmd.args[1])
        offs, data = parse_dat(self.cfg_path.parent / cmd.args[2])
        if not offs.size:
            return
        lo, hi = int(offs.min()), int(offs.max()) + 1
        try:
            self.dram.read(base + lo, hi - lo)
        except DramAccessError:  # some traces load without a mem_init first
            self.dram.map(base + lo, hi - lo, cmd.args[2])
        self.dram.scatter(base, offs, data, "host")

    def do_reg_write(self, cmd: Command) -> None:
        try:
            addr, value = lookup(cmd.args[0]).address, parse_int(cmd.args[1])
        except (ValueError, IndexError) as exc:
            raise MalformedTrace(f"{self.where(cmd)}: malformed "
                                 f"reg_write({', '.join(cmd.args)}): {exc}") from exc
        self.dla.csb_write(addr, value)

    def do_reg_read(self, cmd: Command) -> None:
        value = self.dla.csb_read(lookup(cmd.args[0]).address)
        if len(cmd.args) > 1 and value != parse_int(cmd.args[1]):
            raise TraceError(f"{self.where(cmd)}: {cmd.args[0]} reads {value:#x}, "
                             f"expected {cmd.args[1]}")

    def do_poll_reg_equal(self, cmd: Command) -> None:
        value = self.dla.csb_read(lookup(cmd.args[0]).address)
        if value != parse_int(cmd.args[1]):
            raise TraceError(f"{self.where(cmd)}: poll_reg_equal({cmd.args[0]}) would wait "
                             f"forever: reads {value:#x}, expected {cmd.args[1]}")

    def do_intr_notify(self, cmd: Command) -> None:
        source, _, group = cmd.args[0].rpartition("_")
        bit = status_bit(source, int(group))
        glb = self.dla.glb
        if not glb.status & bit:
            raise TraceError(f"{self.where(cmd)}: interrupt {cmd.args[0]} was never raised")
        glb.csb_write("S_INTR_STATUS", bit)  # the trace player acknowledges it
        self.done.add(cmd.args[1])

    def do_check_crc(self, cmd: Command) -> None:
        sync = cmd.args[0]
        base, size, golden = (parse_int(a) for a in cmd.args[2:5])
        if sync not in self.done:
            raise TraceError(f"{self.where(cmd)}: check_crc waits for {sync}, never notified")
        crc = zlib.crc32(self.dram.read(base, size).tobytes()) & 0xFFFFFFFF
        if crc != golden:
            raise TraceError(f"{self.where(cmd)}: CRC of [{base:#x}, +{size:#x}) is {crc:#010x}, "
                             f"golden {golden:#010x}")
        self.checks += 1

    def do_check_nothing(self, cmd: Command) -> None:
        pass

    def do_sync_notify(self, cmd: Command) -> None:
        pass  # ordering between units of the RTL test bench; the model is sequential

    do_sync_wait = do_sync_notify


def _model(backend: str, cfg: HwConfig, strict: bool):
    """The cmodel's :class:`Dla` a trace plays on (``csb_write``, ``csb_read``, ``dram``,
    ``glb``, ``stats``, ``notes``); the RTL plays traces in a simulation of its own
    (:mod:`accel.rtl.trace_player`)."""
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
    :func:`accel.rtl.trace_player.play`), whose simulations ``player`` (an
    :class:`accel.rtl.trace_player.TracePlayer` for that simulator and memory) keeps
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
            from accel.rtl.trace_player import play

            run = player.play(trace_dir, cfg) if player is not None else \
                play(trace_dir, cfg, simulator=simulator, memory=memory)
            result.status = "pass" if run.passed else "fail"
            result.reason, result.cycles = run.reason, run.cycles
            if run.engine_seconds > 0:
                result.note = (f"{simulator}, {memory} memory: engine ran {run.engine_cycles} "
                               f"cycles at {run.engine_cycles / run.engine_seconds:,.0f} "
                               f"cycles/s")
            result.seconds = time.perf_counter() - t0
            return result
        dla = _model(backend, cfg, strict)
        player = _Player(cfg_path, dla)
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
        from accel.rtl.trace_player import TracePlayer

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
