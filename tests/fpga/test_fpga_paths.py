"""``scripts/fpga_paths.py`` on a hand-written SDF whose paths are summed by hand."""

from __future__ import annotations

from scripts.fpga_paths import arrivals, main, read_sdf, register

# two registers (a, b) feed a LUT whose output is c's input; b also feeds d through a
# carry cell.  Delays (ps, the slowest of each triple counts):
#   a.Q 500 -> net 1000 -> lut A->F 240 -> net 300 -> c.M, setup 0  : 2,040
#   b.Q 500 -> net 4000 -> lut B->F 240 -> net 300 -> c.M           : 5,040 (c's worst)
#   b.Q 500 -> net 2000 -> carry A->F 450 -> net 700 -> d.DI, setup 100 : 3,750
SDF = r"""(DELAYFILE
  (SDFVERSION "3.0")
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT a_TRELLIS_FF_Q/Q lut/A (900:950:1000) (900:950:1000))
        (INTERCONNECT b_TRELLIS_FF_Q_3/Q lut/B (3000:3500:4000) (3000:3500:4000))
        (INTERCONNECT lut/F c\[2\]_TRELLIS_FF_Q/M (300:300:300) (300:300:300))
        (INTERCONNECT b_TRELLIS_FF_Q_3/Q carry\$CCU2_COMB0/A (2000:2000:2000) (2000:2000:2000))
        (INTERCONNECT carry\$CCU2_COMB0/F d_TRELLIS_FF_Q/DI (700:700:700) (700:700:700))
      )
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE a_TRELLIS_FF_Q)
    (DELAY (ABSOLUTE
        (IOPATH CLK Q (430:477:500) (430:477:500))
    ))
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE b_TRELLIS_FF_Q_3)
    (DELAY (ABSOLUTE
        (IOPATH CLK Q (430:477:500) (430:477:500))
    ))
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE lut)
    (DELAY (ABSOLUTE
        (IOPATH A F (200:218:240) (200:218:240))
        (IOPATH B F (200:218:240) (200:218:240))
    ))
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE carry\$CCU2_COMB0)
    (DELAY (ABSOLUTE
        (IOPATH A F (300:400:450) (300:400:450))
    ))
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE c\[2\]_TRELLIS_FF_Q)
    (TIMINGCHECK
      (SETUPHOLD (posedge M) (posedge CLK) (0:0:0) (233:268:303))
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE d_TRELLIS_FF_Q)
    (TIMINGCHECK
      (SETUPHOLD (posedge DI) (posedge CLK) (100:100:100) (0:0:0))
    )
  )
)
"""


def test_the_latest_arrival_at_each_register_input(tmp_path) -> None:
    path = tmp_path / "top.sdf"
    path.write_text(SDF)
    t = read_sdf(path)
    arrival, came = arrivals(t)
    assert arrival[("c[2]_TRELLIS_FF_Q", "M")] == 500 + 4000 + 240 + 300
    assert arrival[("d_TRELLIS_FF_Q", "DI")] + t.capture[("d_TRELLIS_FF_Q", "DI")] == 3750
    assert came[("lut", "B")] == ("b_TRELLIS_FF_Q_3", "Q")
    assert came[("c[2]_TRELLIS_FF_Q", "M")] == ("lut", "F")


def test_register_names_lose_their_bits_and_suffixes() -> None:
    assert register("slice_in_w_TRELLIS_FF_Q_11") == "slice_in_w"
    assert register("c[2]_TRELLIS_FF_Q") == "c"
    assert register(r"carry$CCU2_COMB0") == "carry"


def test_the_report_groups_failing_inputs(tmp_path, capsys) -> None:
    path = tmp_path / "top.sdf"
    path.write_text(SDF)
    assert main([str(path), "--period", "3"]) == 0
    out = capsys.readouterr().out
    assert "worst 5.04 ns (198.41 MHz)" in out
    assert "2 register inputs over 3 ns" in out
    lines = [line.split() for line in out.splitlines() if "->" in line and "net" not in line
             and "cell" not in line and "start" not in line]
    assert lines == [["5.04", "1", "b", "->", "c"], ["3.75", "1", "b", "->", "d"]]
