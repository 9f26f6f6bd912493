"""Utilization and timing of a build, read from the yosys and nextpnr logs.

Cell counts come from yosys' final ``stat`` (what synthesis produced: LUT4,
TRELLIS_FF, MULT18X18D, DP16KD, CCU2C); device totals and the maximum
frequency of each clock come from nextpnr (what fits and how fast it runs
after routing; nextpnr prints Fmax after placement and again after routing,
and the last report is the one that counts).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

# "      349   LUT4" (yosys >= 0.4x) or "     LUT4      349" (older releases).
_STAT_NEW = re.compile(r"^\s+(\d+)\s+([A-Za-z_$][\w$]*)\s*$")
_STAT_OLD = re.compile(r"^\s+([A-Za-z_$][\w$]*)\s+(\d+)\s*$")
_UTIL = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%")
_FMAX = re.compile(r"Max frequency for clock '([^']+)': ([\d.]+) MHz "
                   r"\((PASS|FAIL) at ([\d.]+) MHz\)")


def parse_yosys_stat(log: str) -> dict[str, int]:
    """Cell type -> count from the last ``stat`` printed in a yosys log."""
    start = log.rfind("Printing statistics.")
    if start < 0:
        raise ValueError("no 'Printing statistics.' (stat) section in the yosys log")
    cells: dict[str, int] = {}
    for line in log[start:].splitlines():
        for pattern, (ci, ni) in ((_STAT_NEW, (2, 1)), (_STAT_OLD, (1, 2))):
            match = pattern.match(line)
            if match and match.group(ci).isupper():
                cells[match.group(ci)] = int(match.group(ni))
                break
    return cells


def parse_nextpnr_utilisation(log: str) -> dict[str, tuple[int, int]]:
    """Bel type -> (used, available) from nextpnr's last "Device utilisation" table."""
    start = log.rfind("Device utilisation:")
    if start < 0:
        raise ValueError("no 'Device utilisation:' table in the nextpnr log")
    util: dict[str, tuple[int, int]] = {}
    for line in log[start:].splitlines()[1:]:
        match = _UTIL.match(line)
        if match:
            util[match.group(1)] = (int(match.group(2)), int(match.group(3)))
        elif util and not line.startswith("Info:\t") and not line.strip().startswith("Info:"):
            break
    return util


def parse_nextpnr_fmax(log: str) -> dict[str, tuple[float, float]]:
    """Clock -> (Fmax MHz, constraint MHz), the last report of each clock."""
    return {m.group(1): (float(m.group(2)), float(m.group(4))) for m in _FMAX.finditer(log)}


def parse_nextpnr_critical_path(report: dict) -> dict:
    """The first critical path of nextpnr's ``--report`` JSON: its first and last cells,
    total delay and how much of it is routing (ns), and its logic steps; ``{}`` if the
    report has no paths (nextpnr gives them only after routing)."""
    paths = report.get("critical_paths") or []
    if not paths or not paths[0].get("path"):
        return {}
    steps = paths[0]["path"]
    total = sum(step["delay"] for step in steps)
    routing = sum(step["delay"] for step in steps if step["type"] == "routing")
    return {"from": steps[0]["from"]["cell"], "to": steps[-1]["to"]["cell"],
            "ns": round(total, 2), "routing_ns": round(routing, 2),
            "logic_steps": sum(step["type"] == "logic" for step in steps)}


@dataclass
class BuildReport:
    """What one bitstream build produced and how fast it runs.  A build stopped after
    synthesis (``placed`` False) has yosys's cell counts only: no Fmax, no bitstream."""

    board: str
    config: str
    atomic_c: int
    atomic_k: int
    target_mhz: float
    fmax_mhz: float | None
    lut4: int
    ff: int
    dsp: int
    bram: int
    carry: int
    bitstream: str | None
    build_s: float
    clocks: dict[str, tuple[float, float]] = field(default_factory=dict)
    utilisation: dict[str, tuple[int, int]] = field(default_factory=dict)
    critical_path: dict = field(default_factory=dict)
    #: nextpnr's placement seed of the build
    seed: int = 1
    #: whether placement and routing were driven by the clock target (not: wire length only)
    timing_driven: bool = True
    #: whether the design was placed and routed (False: synthesis only)
    placed: bool = True

    @property
    def timing_met(self) -> bool | None:
        """Fmax reaches the target; None when nothing was placed."""
        return None if self.fmax_mhz is None else self.fmax_mhz >= self.target_mhz

    def to_dict(self) -> dict:
        return {**asdict(self), "timing_met": self.timing_met}

    def to_text(self) -> str:
        """Human-readable table (also written as ``report.txt``)."""
        def avail(bel: str) -> str:
            return f" / {self.utilisation[bel][1]}" if bel in self.utilisation else ""

        verdict = "met" if self.timing_met else "NOT met"
        rows = [
            ("board", self.board),
            ("config", f"{self.config} ({self.atomic_c}x{self.atomic_k} int8 MACs)"),
            ("LUT4 (logic)", str(self.lut4)),
            ("TRELLIS_COMB", f"{self.utilisation.get('TRELLIS_COMB', ('?',))[0]}"
                             f"{avail('TRELLIS_COMB')} (LUT4 incl. carry halves)"),
            ("FF (TRELLIS_FF)", f"{self.ff}{avail('TRELLIS_FF')}"),
            ("DSP (MULT18X18D)", f"{self.dsp}{avail('MULT18X18D')}"),
            ("BRAM (DP16KD)", f"{self.bram}{avail('DP16KD')}"),
            ("carry (CCU2C)", str(self.carry)),
            ("Fmax", f"{self.fmax_mhz:.2f} MHz (target {self.target_mhz:g} MHz, {verdict})"
                     if self.placed else "not placed (--synth-only)"),
        ]
        if self.critical_path:
            cp = self.critical_path
            rows.append(("critical path", f"{cp['from']} -> {cp['to']}: {cp['ns']:.2f} ns "
                                          f"({cp['routing_ns']:.2f} routing, "
                                          f"{cp['logic_steps']} logic steps)"))
        if not self.placed:         # nextpnr did not run: no utilisation of the part
            rows = [row for row in rows if row[0] != "TRELLIS_COMB"]
        rows += [
            *([("nextpnr seed", str(self.seed))] if self.placed else []),
            ("placement", "none (--synth-only)" if not self.placed else
                          "timing-driven" if self.timing_driven
                          else "wire length only (--no-timing-driven)"),
            ("bitstream", self.bitstream or "none"),
            ("build time", f"{self.build_s:.1f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows) + "\n"

    def write(self, out_dir: str | Path) -> None:
        """Write ``report.json`` and ``report.txt`` into ``out_dir``."""
        out = Path(out_dir)
        (out / "report.json").write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        (out / "report.txt").write_text(self.to_text())
