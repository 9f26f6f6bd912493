"""The committed register table is what scripts/gen_regs.py makes from NVDLA's RDL."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import REPO, shared_path


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_regs", REPO / "scripts" / "gen_regs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_table_is_up_to_date(tmp_path: Path):
    rdl = shared_path("nvdla", "rdl")
    gen = _load_generator()
    out = tmp_path / "nvdla_regs.py"
    assert gen.main([str(rdl), "-o", str(out)]) == 0
    committed = (REPO / "accel" / "regs" / "nvdla_regs.py").read_text()
    assert out.read_text() == committed, "run: python scripts/gen_regs.py"


def test_parse_unit_handles_enum_descriptions_and_implicit_offsets():
    gen = _load_generator()
    text = '''
regfile regs_NVDLA_X{
    reg {
        name = "A";
        desc = "braces { } and // inside";
        enum A_M_enum {
            OFF = 1'd0 {desc = "off";};
            ON = 1'd1 {desc = "on";};
        };
        field { encode = A_M_enum; sw = rw; reset = 0x1; } M[0:0];
        field { sw = r; reset = 0x3; } N[9:8];
        N->desc="x";
    }A @0x10;
    reg { name = "B"; field { sw = rw; reset = 0x0; } V[31:0]; }B;
};
addrmap  {
    regs_NVDLA_X NVDLA_X @0x4000;
}addrmap_NVDLA;
'''
    unit, base, regs = gen.parse_unit(text)
    assert (unit, base) == ("NVDLA_X", 0x4000)
    assert regs[0] == ("A", 0x10, [("M", 0, 0, 1, "rw", {"OFF": 0, "ON": 1}),
                                   ("N", 8, 9, 3, "r", {})])
    assert regs[1][:2] == ("B", 0x14)
