"""The cmodel's trace player: a parsed trace (:mod:`accel.trace.script`) played statement by
statement on a :class:`~accel.cmod.dla.Dla` (or anything with its ``dram``, ``glb``,
``csb_write`` and ``csb_read``).

Every statement becomes a ``do_<name>`` method; ``check_crc`` compares
``zlib.crc32`` of the checked region with the golden value and counts the
checks, so the runner can refuse a trace that verified nothing.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from accel.cmod.dram import DramAccessError
from accel.cmod.errors import ConfigError, UnsupportedError
from accel.cmod.glb import status_bit
from accel.regs import UnknownRegisterError, lookup
from accel.trace.script import Command, MalformedTrace, TraceError, parse_dat, parse_int


class CmodPlayer:
    """Plays trace statements on the cmodel ``dla`` (see the module docstring)."""

    def __init__(self, cfg_path: Path, dla: Any) -> None:
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
                                 f"({', '.join(cmd.args)}): {exc}") from None

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
            raise MalformedTrace(f"{self.where(cmd)}: malformed reg_write({', '.join(cmd.args)}): "
                             f"{exc}") from None
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
