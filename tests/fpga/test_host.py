"""``opendla fpga run`` against a stand-in board: a byte link whose far end decodes the
bridge protocol (written here from the protocol's table, not with ``fpga.protocol``) and
runs what it is told on a cmodel, as the board's engine would.

The real bridge is checked in cocotb (``tests/rtl/bridge_tb.py``); these tests check
the host side: every byte it sends, the interrupt polling, the readback, the checks
against the cmodel and the errors."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from accel.cmod.dla import Dla
from accel.cmod.dram import DramAccessError
from accel.config import get_preset
from opendla.cli import main
from tests.fpga.models import compile_lenet


class CmodelBoard:
    """The far end of the UART: opcodes 1-4 (write/read register, write/read memory),
    little-endian fields, one response per command; registers and memory of a cmodel."""

    def __init__(self, corrupt_reads: bool = False, silent: bool = False) -> None:
        self.dla = Dla(get_preset("nv_small"))
        self.pending = b""
        self.answer = bytearray()
        self.corrupt_reads, self.silent = corrupt_reads, silent
        self.commands: dict[int, int] = {}

    # pyserial's Serial, as far as the host uses it
    def write(self, data: bytes) -> int:
        self.pending += bytes(data)
        while self._step():
            pass
        return len(data)

    def read(self, size: int) -> bytes:
        out, self.answer = bytes(self.answer[:size]), self.answer[size:]
        return out

    def close(self) -> None:
        pass

    def _memory(self, addr: int, size: int) -> None:
        try:
            self.dla.dram.read(addr, size)
        except DramAccessError:
            self.dla.dram.map(addr, size, f"board {addr:#x}")

    def _step(self) -> bool:
        p = self.pending
        if not p:
            return False
        op = p[0]
        need = {1: 9, 2: 5, 3: 7, 4: 7}.get(op)
        assert need is not None, f"unknown opcode {op:#x}"
        if len(p) < need:
            return False
        if op == 3:
            need += struct.unpack_from("<H", p, 5)[0]
            if len(p) < need:
                return False
        self.pending = p[need:]
        self.commands[op] = self.commands.get(op, 0) + 1
        if self.silent:
            return True
        addr = struct.unpack_from("<I", p, 1)[0]
        if op == 1:
            self.dla.csb_write(addr, struct.unpack_from("<I", p, 5)[0])
            self.answer += bytes([0x81])
        elif op == 2:
            self.answer += bytes([0x82]) + struct.pack("<I", self.dla.csb_read(addr))
        elif op == 3:
            data = np.frombuffer(p[7:need], np.uint8)
            self._memory(addr, data.size)
            self.dla.dram.write(addr, data, "host")
            self.answer += bytes([0x83])
        else:
            count = struct.unpack_from("<H", p, 5)[0]
            data = np.array(self.dla.dram.read(addr, count), np.uint8)
            if self.corrupt_reads:
                data[-1] ^= 1
            self.answer += data.tobytes() + bytes([0x84])
        return True


@pytest.fixture(scope="module")
def lenet(tmp_path_factory) -> tuple[Path, Path]:
    return compile_lenet(tmp_path_factory.mktemp("lenet"), digits=3)


def _board(monkeypatch, board: CmodelBoard) -> None:
    import fpga.host

    monkeypatch.setattr(fpga.host, "open_link", lambda port, baud, timeout: board)


def test_the_board_runs_every_convolution_as_the_cmodel(monkeypatch, tmp_path, lenet, capsys):
    loadable, q = lenet
    assert main(["run", str(loadable), "--input", str(q), "--save-outputs",
                 str(tmp_path / "cmodel")]) == 0
    board = CmodelBoard()
    _board(monkeypatch, board)
    capsys.readouterr()
    assert main(["fpga", "run", "--port", "stand-in", str(loadable), "--input", str(q),
                 "--save-outputs", str(tmp_path / "board"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["board_convolutions"] == 3 * 5          # LeNet: 2 convs + 3 FCs per digit
    assert doc["cmodel_operations"] == {"PDP operations": 3 * 2}
    assert board.commands[3] > 0 and board.commands[4] > 0 and board.commands[2] >= 15
    (want,) = (tmp_path / "cmodel").glob("*.npy")
    got = np.load(tmp_path / "board" / want.name)
    np.testing.assert_array_equal(got, np.load(want))


def test_a_full_engine_board_runs_the_poolings_too(monkeypatch, tmp_path, lenet, capsys):
    """``--design engine-full``: LeNet's max-pools go to the board as well, nothing is
    left to the cmodel."""
    loadable, q = lenet
    assert main(["run", str(loadable), "--input", str(q), "--save-outputs",
                 str(tmp_path / "cmodel")]) == 0
    _board(monkeypatch, CmodelBoard())
    capsys.readouterr()
    assert main(["fpga", "run", "--port", "stand-in", "--design", "engine-full",
                 str(loadable), "--input", str(q), "--save-outputs", str(tmp_path / "board"),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["board_operations"] == {"conv": 3 * 5, "pdp": 3 * 2}
    assert doc["cmodel_operations"] == {}
    (want,) = (tmp_path / "cmodel").glob("*.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "board" / want.name), np.load(want))


def test_a_board_left_in_the_other_register_group_runs(monkeypatch, tmp_path, lenet, capsys):
    """One digit is 5 convolutions: the second run finds the conv units' consumer pointers
    at group 1 and must program that group (else no operation starts)."""
    loadable, q = lenet
    one = tmp_path / "one.npy"
    np.save(one, np.load(q)[:1])
    board = CmodelBoard()
    _board(monkeypatch, board)
    for _ in range(2):
        assert main(["fpga", "run", "--port", "stand-in", str(loadable), "--input", str(one),
                     "--timeout", "0.5"]) == 0, capsys.readouterr().err


def test_a_board_output_that_differs_is_caught(monkeypatch, lenet, capsys):
    loadable, q = lenet
    _board(monkeypatch, CmodelBoard(corrupt_reads=True))
    assert main(["fpga", "run", "--port", "stand-in", str(loadable), "--input", str(q)]) == 1
    assert "differ" in capsys.readouterr().err


def test_a_silent_board_is_an_error_not_a_hang(monkeypatch, lenet, capsys):
    loadable, q = lenet
    _board(monkeypatch, CmodelBoard(silent=True))
    assert main(["fpga", "run", "--port", "stand-in", str(loadable), "--input", str(q),
                 "--timeout", "0.2"]) == 1
    assert "answered 0 of" in capsys.readouterr().err


def test_regions_that_share_board_ram_are_refused(tmp_path):
    from fpga.host import BoardError, BoardPlayer

    trace = tmp_path / "t"
    trace.mkdir()
    (trace / "t.cfg").write_text("mem_init(pri_mem, 0x80000000, 0x100, ALL_ZERO);\n"
                                 "mem_init(pri_mem, 0x80020080, 0x100, ALL_ZERO);\n")
    with pytest.raises(BoardError, match="share the board's 128 KiB RAM"):
        BoardPlayer(client=None, ram_bytes=1 << 17).play(trace, [])
    (trace / "t.cfg").write_text("mem_init(pri_mem, 0x8001ff80, 0x100, ALL_ZERO);\n")
    with pytest.raises(BoardError, match="wraps around"):
        BoardPlayer(client=None, ram_bytes=1 << 17).play(trace, [])


def test_an_unopenable_port_names_it(lenet, capsys):
    loadable, q = lenet
    assert main(["fpga", "run", "--port", "/dev/no-such-tty", str(loadable), "--input",
                 str(q)]) == 2
    assert "/dev/no-such-tty" in capsys.readouterr().err
