"""``fpga.protocol``: command sizes agree with the encoder, bad opcodes are named."""

from __future__ import annotations

import pytest

from fpga import protocol


@pytest.mark.parametrize("command", [
    protocol.write_reg(0x5000, 0xDEADBEEF), protocol.read_reg(0x5000),
    protocol.write_mem(0x8000_0003, bytes(range(37))), protocol.read_mem(0x8000_0003, 37),
])
def test_command_size_is_the_encoded_length(command: bytes) -> None:
    assert protocol.command_size(command) == len(command)
    assert protocol.command_size(command + b"\x01\x02") == len(command)   # the next one


def test_a_memory_write_is_sized_once_its_count_arrived() -> None:
    command = protocol.write_mem(0x10, b"abc")
    assert protocol.command_size(command[:5]) == 7      # count not there yet: fixed part
    assert protocol.command_size(command[:7]) == 10


def test_an_unknown_opcode_is_named() -> None:
    with pytest.raises(protocol.ProtocolError, match="0x7f"):
        protocol.command_size(b"\x7f")
