"""The host side of ``opendla fpga run``: the board's conv engine as the RTL of the ``rtl`` backend.

The board (:mod:`fpga.engine_top`) holds the engine, its memory in block RAM
and the UART bridge (:mod:`fpga.protocol`).  A loadable runs as it runs on
``--backend rtl`` (:mod:`accel.backends.rtl`): the firmware drives the cmodel,
and each operation the board's engine implements (its design's :data:`DESIGN_KINDS`) is
recorded as a trace, which :class:`BoardPlayer` plays on the board instead of a
simulation - its
memory regions written into the board RAM, its registers written over the
CSB, the interrupt status polled until the unit's done bit, the output region
read back and checked against the cmodel's CRC.  The board's bytes are what
later operations read.

The board RAM takes DLA addresses modulo its size; a trace whose regions
would land on each other there is refused before anything is sent.
"""

from __future__ import annotations

import itertools
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from accel.cmod.glb import status_bit
from accel.regs import lookup
from accel.trace.rtl_player import RtlError
from accel.trace.script import find_cfg, parse_cfg, parse_dat, parse_int
from fpga.errors import FpgaError
from fpga.protocol import BAUD, ENGINE_ENTRIES, RAM_BYTES, BridgeClient, ProtocolError

INTR_STATUS = lookup("NVDLA_GLB.S_INTR_STATUS").address


#: the operations each board design's engine runs (``fpga build --design``): the
#: convolutions, or with ``engine-full`` also PDP, SDP reading memory, CDP and
#: convolutions with per-element operands
DESIGN_KINDS = {"engine": ("conv",),
                "engine-full": ("conv", "conv_elements", "pdp", "sdp", "cdp")}


class BoardError(FpgaError, RtlError):
    """The board did not run an operation (no answer, no interrupt, a refused trace)."""


class BoardPlayer:
    """Plays recorded traces (:mod:`accel.trace.writer`'s format) on the board.

    ``client`` talks to the bridge; ``ram_bytes`` is the board's RAM (DLA addresses
    are taken modulo it); an interrupt that does not come within ``timeout_s`` is a
    :class:`BoardError` with the interrupt status.
    """

    #: entries of the engine's feature and weight memories (what fits, for RtlDla)
    entries = ENGINE_ENTRIES

    def __init__(self, client: BridgeClient, ram_bytes: int = RAM_BYTES,
                 timeout_s: float = 5.0, design: str = "engine") -> None:
        if design not in DESIGN_KINDS:
            raise ValueError(f"design {design!r} not in {', '.join(DESIGN_KINDS)}")
        self.client, self.ram_bytes, self.timeout_s = client, ram_bytes, timeout_s
        #: the operations the board's engine runs (:attr:`accel.backends.rtl.RtlDla.kinds`)
        self.kinds = DESIGN_KINDS[design]
        self.operations = 0
        self.bytes_sent = 0
        self.bytes_read = 0
        self._reads: dict[tuple[int, int], bytes] = {}

    def close(self) -> None:
        pass

    def consumer_groups(self, units: tuple[str, ...]) -> dict[str, int]:
        """The register group each of ``units`` executes next (``S_POINTER.CONSUMER``): a
        board that ran an odd number of operations before starts from group 1."""
        groups = {}
        try:
            for unit in units:
                reg = lookup(f"{unit}.S_POINTER")
                value = self.client.read_reg(reg.address)
                groups[unit] = (value & reg.field("CONSUMER").mask) >> \
                    reg.field("CONSUMER").lsb
        except ProtocolError as exc:
            raise BoardError(f"the board does not answer: {exc}") from None
        return groups

    def _placed(self, cmds: list, trace: str) -> None:
        """Refuse ``cmds`` if two of its regions share board RAM."""
        spans = []
        for cmd in cmds:
            if cmd.name == "mem_init":
                base, size = parse_int(cmd.args[1]), parse_int(cmd.args[2])
                at = base % self.ram_bytes
                if at + size > self.ram_bytes:
                    raise BoardError(f"{trace}: region [{base:#x}, +{size:#x}) wraps around the "
                                     f"board's {self.ram_bytes // 1024} KiB RAM")
                spans.append((at, at + size, base))
        spans.sort()
        for (_, a1, b0), (c0, _, b1) in itertools.pairwise(spans):
            if c0 < a1:
                raise BoardError(f"{trace}: regions at {b0:#x} and {b1:#x} share the board's "
                                 f"{self.ram_bytes // 1024} KiB RAM (addresses are taken "
                                 f"modulo its size)")

    def play(self, trace_dir: Path, dumps: list[tuple[int, int, Path]]) -> dict[str, Any]:
        """Play the trace in ``trace_dir`` on the board; write each ``(addr, size, file)``
        region of the board's memory afterwards to ``file``.  A CRC that differs is a
        :class:`BoardError` (after the dumps are written)."""
        trace_dir = Path(trace_dir)
        cfg = find_cfg(trace_dir)
        cmds = parse_cfg(cfg)
        self._placed(cmds, trace_dir.name)
        c = self.client
        start = time.perf_counter()
        crc_checks = []
        self._reads = {}
        try:
            for cmd in cmds:
                if cmd.name == "mem_load":
                    offs, data = parse_dat(trace_dir / cmd.args[2])
                    if offs.size:
                        lo = int(offs.min())
                        image = np.zeros(int(offs.max()) + 1 - lo, np.uint8)
                        image[offs - lo] = data
                        c.write_mem(parse_int(cmd.args[1]) + lo, image.tobytes())
                        self.bytes_sent += image.size
                elif cmd.name == "reg_write":
                    c.write_reg(lookup(cmd.args[0]).address, parse_int(cmd.args[1]))
                elif cmd.name == "intr_notify":
                    self._wait(cmd.args[0], trace_dir.name)
                elif cmd.name == "check_crc":
                    crc_checks.append(tuple(parse_int(a) for a in cmd.args[2:5]))
                elif cmd.name not in ("mem_init", "check_nothing"):
                    raise BoardError(f"{cfg}:{cmd.line}: the board player does not play "
                                     f"{cmd.name}")
            for addr, size, file in dumps:
                Path(file).write_bytes(self._read(addr, size))
            for base, size, golden in crc_checks:
                crc = zlib.crc32(self._read(base, size)) & 0xFFFFFFFF
                if crc != golden:
                    raise BoardError(f"{trace_dir.name}: CRC of [{base:#x}, +{size:#x}) on the "
                                     f"board is {crc:#010x}, the cmodel's {golden:#010x}")
        except ProtocolError as exc:
            raise BoardError(f"{trace_dir.name}: {exc}") from None
        self.operations += 1
        return {"ok": True, "cycles": None, "seconds": time.perf_counter() - start}

    def _read(self, addr: int, size: int) -> bytes:
        """``size`` bytes at ``addr`` (each region read once per trace)."""
        if (addr, size) not in self._reads:
            self.bytes_read += size
            self._reads[addr, size] = self.client.read_mem(addr, size)
        return self._reads[addr, size]

    def _wait(self, source_group: str, trace: str) -> None:
        """Poll the interrupt status until ``source_group`` (e.g. ``SDP_0``) is set, then
        acknowledge it."""
        source, _, group = source_group.rpartition("_")
        bit = status_bit(source, int(group))
        deadline = time.monotonic() + self.timeout_s
        while True:
            status = self.client.read_reg(INTR_STATUS)
            if status & bit:
                self.client.write_reg(INTR_STATUS, bit)
                return
            if time.monotonic() > deadline:
                raise BoardError(f"{trace}: no {source_group} interrupt within "
                                 f"{self.timeout_s:g} s (S_INTR_STATUS={status:#x})")


def open_link(port: str, baud: int = BAUD, timeout_s: float = 2.0) -> Any:
    """The serial link to the board: a device (``/dev/ttyUSB0``) or any pyserial URL
    (``socket://host:port``, ``loop://``)."""
    import serial

    try:
        return serial.serial_for_url(port, baudrate=baud, timeout=timeout_s)
    except (serial.SerialException, ValueError) as exc:
        raise BoardError(f"cannot open --port {port!r}: {exc}") from None
