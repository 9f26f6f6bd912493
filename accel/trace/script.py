"""NVIDIA's register-trace scripts (``verif/tests/trace_tests``): the ``.cfg`` statements
and the ``.dat`` packet files, parsed into plain data.

A trace directory ``<preset>/<name>/`` holds ``<name>.cfg``, a script of
``mem_init``, ``mem_load`` (``.dat`` packet files), ``reg_write`` by symbolic
register name, ``poll_reg_equal``, ``intr_notify``, ``check_crc`` and
``check_nothing`` commands, and the ``.dat`` files.  Nothing here knows what
plays a trace: the cmodel player (:mod:`accel.trace.cmod_player`), the RTL
player (:mod:`accel.trace.rtl_player`) and the board (:mod:`fpga.host`) all read
traces through this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accel.errors import AccelError, AccelInputError

_STMT = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*;?\s*$")
_PACKET = re.compile(r"\{\s*offset\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*size\s*:\s*(\d+)\s*,"
                     r"\s*payload\s*:\s*([^}]*)\}")


class TraceError(AccelError):
    """A trace statement that failed (a CRC, a read, an interrupt); the message starts
    with ``file:line``."""


class MalformedTrace(TraceError, AccelInputError):
    """A trace that cannot be played as written: unparsable, an unknown command or
    register, a bad number, no ``.cfg`` or several, nothing to check.  Bad input, not a
    failed check (``opendla trace run`` exits 2 for it, 1 for a failed check)."""


@dataclass
class Command:
    """One statement of a trace ``.cfg``."""

    name: str
    args: list[str]
    line: int


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
