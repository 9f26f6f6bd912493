"""The host bridge's byte protocol (UART, 8N1), shared by the RTL's tests and the host driver.

A command is an opcode byte and little-endian fields; the bridge answers each
one before reading the next:

==============  =====================================  =================================
opcode          fields                                 response
==============  =====================================  =================================
``WRITE_REG``   CSB byte address (4), value (4)        ``ACK|WRITE_REG``
``READ_REG``    CSB byte address (4)                   ``ACK|READ_REG``, value (4)
``WRITE_MEM``   address (4), count (2), count bytes    ``ACK|WRITE_MEM``
``READ_MEM``    address (4), count (2)                 count bytes, ``ACK|READ_MEM``
==============  =====================================  =================================

Memory addresses are the DLA's (the board RAM takes them modulo its size).
"""

from __future__ import annotations

import struct
from typing import Protocol

from fpga.errors import FpgaError

#: the board build's defaults the host relies on (:mod:`fpga.engine_top`): UART bits per
#: second, bytes of DLA memory in block RAM, entries of the engine's feature and weight memories
BAUD = 1_000_000
RAM_BYTES = 1 << 17
ENGINE_ENTRIES = 2048

WRITE_REG, READ_REG, WRITE_MEM, READ_MEM = 0x01, 0x02, 0x03, 0x04
ACK = 0x80
#: bytes one memory command moves at most
MAX_COUNT = 0xFFFF


class ProtocolError(FpgaError, RuntimeError):
    """The bridge answered something other than the expected response."""


def write_reg(addr: int, value: int) -> bytes:
    return struct.pack("<BII", WRITE_REG, addr, value & 0xFFFFFFFF)


def read_reg(addr: int) -> bytes:
    return struct.pack("<BI", READ_REG, addr)


def write_mem(addr: int, data: bytes) -> bytes:
    if not 0 < len(data) <= MAX_COUNT:
        raise ValueError(f"a memory write moves 1..{MAX_COUNT} bytes, not {len(data)}")
    return struct.pack("<BIH", WRITE_MEM, addr & 0xFFFFFFFF, len(data)) + bytes(data)


def read_mem(addr: int, count: int) -> bytes:
    if not 0 < count <= MAX_COUNT:
        raise ValueError(f"a memory read moves 1..{MAX_COUNT} bytes, not {count}")
    return struct.pack("<BIH", READ_MEM, addr & 0xFFFFFFFF, count)


def command_size(head: bytes) -> int:
    """Bytes of the command ``head`` starts with (a memory write's data included); while
    a memory write's count is not in ``head`` yet, its fixed part."""
    fixed = {WRITE_REG: 9, READ_REG: 5, WRITE_MEM: 7, READ_MEM: 7}.get(head[0])
    if fixed is None:
        raise ProtocolError(f"unknown opcode {head[0]:#04x}")
    if head[0] == WRITE_MEM and len(head) >= fixed:
        return fixed + struct.unpack_from("<H", head, 5)[0]
    return fixed


def response_size(command: bytes) -> int:
    """Bytes the bridge answers ``command`` with."""
    op = command[0]
    if op == READ_REG:
        return 5
    if op == READ_MEM:
        return struct.unpack_from("<H", command, 5)[0] + 1
    return 1


def check_response(command: bytes, response: bytes) -> bytes:
    """The payload of ``response`` to ``command`` (register value or memory bytes)."""
    op = command[0]
    want = response_size(command)
    if len(response) != want:
        raise ProtocolError(f"command {op:#04x}: {len(response)} response bytes, expected "
                            f"{want}")
    ack = response[0] if op != READ_MEM else response[-1]
    if ack != ACK | op:
        raise ProtocolError(f"command {op:#04x}: acknowledged {ack:#04x}, expected "
                            f"{ACK | op:#04x}")
    return response[1:] if op != READ_MEM else response[:-1]


class Link(Protocol):
    """A byte link to the bridge (a pyserial ``Serial`` is one)."""

    def write(self, data: bytes) -> int | None: ...
    def read(self, size: int) -> bytes: ...


class BridgeClient:
    """Registers and memory of the board's DLA over ``link``."""

    def __init__(self, link: Link) -> None:
        self.link = link

    def _call(self, command: bytes) -> bytes:
        self.link.write(command)
        want = response_size(command)
        response = self.link.read(want)
        if len(response) < want:
            raise ProtocolError(f"command {command[0]:#04x}: the bridge answered "
                                f"{len(response)} of {want} bytes before the timeout")
        return check_response(command, response)

    def write_reg(self, addr: int, value: int) -> None:
        self._call(write_reg(addr, value))

    def read_reg(self, addr: int) -> int:
        return struct.unpack("<I", self._call(read_reg(addr)))[0]

    def write_mem(self, addr: int, data: bytes) -> None:
        for off in range(0, len(data), MAX_COUNT):
            self._call(write_mem(addr + off, data[off:off + MAX_COUNT]))

    def read_mem(self, addr: int, count: int) -> bytes:
        return b"".join(self._call(read_mem(addr + off, min(MAX_COUNT, count - off)))
                        for off in range(0, count, MAX_COUNT))
