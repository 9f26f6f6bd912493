"""The timing-closure idioms of the RTL, named once and used everywhere.

Each is a way of keeping a long path out of one clock cycle without changing what the
design computes:

* **kept registers** (:func:`kept`, :func:`kept_copies`): registers marked ``keep``, which
  the FPGA flow preserves (:data:`fpga.build.KEEP_REGISTERS`), so that yosys does not merge
  identical copies back into one.  A flag that enables hundreds of flip-flops across the
  die gets a copy per group of registers, each placed beside its group, instead of one
  net with a huge fanout.
* **registered copies** (:func:`registered_copy`, :func:`registered_copies`): kept
  registers that take a value every cycle, i.e. the value a cycle late on a net of its own.
* **values before the last** (:class:`BeforeLast`): a counter that must know whether its
  *next* value is its last compares its current value with ``last - 1`` held in a
  register (written ``_m2`` for "count minus two" beside the last value ``_m1``), instead
  of an adder chained into an equality in the same cycle.
* **flags kept with counters** (:class:`PassCount`, :func:`set_all`): a flag worked out
  as its counter moves (a loop's last pass), and written into all of its copies at once.
* **pipeline stages** (:func:`stage`, :func:`delayed`, :func:`shift_right_stages`): in a
  pipeline whose stages all move every cycle, a value in a register of the next stage, or
  carried beside the stages that work on others; a variable shift in two stages.

The history of which path each of them removed, with the clock it reached, is in
``docs/rtl_timing_notes.md``.
"""

from __future__ import annotations

from collections.abc import Iterable

from amaranth.hdl import Cat, Const, Module, Shape, Signal, Value


def kept(name: str, shape: Shape | int | range = 1, init: int = 0) -> Signal:
    """A register yosys keeps as its own cells (``keep``): a copy placed beside its loads."""
    return Signal(shape, name=name, init=init, attrs={"keep": 1})


def kept_like(other: Value, name: str) -> Signal:
    """A kept register of ``other``'s shape (see :func:`kept`)."""
    return Signal.like(other, name=name, attrs={"keep": 1})


def kept_copies(name: str, count: int, shape: Shape | int | range = 1,
                init: int = 0) -> list[Signal]:
    """``count`` kept registers ``name_0`` ... of one value, each to drive its own group of
    loads; the caller writes them all at once (:func:`set_all`)."""
    return [kept(f"{name}_{i}", shape, init) for i in range(count)]


def set_all(signals: Iterable[Signal], value: Value | int) -> list:
    """The assignments of ``value`` to every copy in ``signals``."""
    return [signal.eq(value) for signal in signals]


def registered_copy(m: Module, name: str, value: Value) -> Signal:
    """A kept register taking ``value`` every cycle: ``value`` one cycle late, on a net of
    its own (for a value that holds, such as an operation's register, the same value)."""
    copy = kept_like(value, name)
    m.d.sync += copy.eq(value)
    return copy


def registered_copies(m: Module, name: str, value: Value, count: int) -> list[Signal]:
    """``count`` registered copies of ``value`` (:func:`registered_copy`), one per group
    of loads."""
    copies = kept_copies(name, count, Shape.cast(value.shape()))
    m.d.sync += set_all(copies, value)
    return copies


class PassCount:
    """A loop of ``total`` passes (lines of a surface, surfaces of a cube, a row's columns):
    the passes left after this one (``left``, ``width`` bits) and whether this is the last
    (``last``), registers stepped with the loop, so that the decision at a loop's end is a
    register, not ``y + 1 == h`` (an adder into an equality: 10-12 ns on an ECP5 in SDP's
    walkers).  ``total`` must hold from :meth:`first` on."""

    def __init__(self, m: Module, name: str, total: Value, width: int) -> None:
        self.total = total
        self.left = Signal(width, name=f"{name}_left")
        self.last = Signal(name=f"{name}_last")
        # the first pass's, for the restarts
        self.total_m1 = Signal(width, name=f"{name}_total_m1")
        self.single = Signal(name=f"{name}_single")
        m.d.sync += [self.total_m1.eq(total - 1), self.single.eq(total == 1)]

    def first(self, m: Module) -> None:
        """The loop's first pass next cycle (from ``total`` itself)."""
        m.d.sync += [self.left.eq(self.total - 1), self.last.eq(self.total == 1)]

    def next(self, m: Module) -> None:
        """The next pass next cycle."""
        m.d.sync += [self.left.eq(self.left - 1), self.last.eq(self.left == 1)]

    def restart(self, m: Module) -> None:
        """The first pass again next cycle (``total`` has been held a cycle)."""
        m.d.sync += [self.left.eq(self.total_m1), self.last.eq(self.single)]


class BeforeLast:
    """Registers of a count's last value ``count - 1`` (``name_m1``, :attr:`last`) and of
    the value before it ``count - 2`` (``name_m2``, :attr:`before`): a counter at
    ``before`` moves to its last value, so the flag of its last value is set from an
    equality of registers, not from ``counter + 1 == count - 1`` (an adder into an
    equality).  ``count`` must hold while they are used (an operation's register)."""

    def __init__(self, name: str, width: int) -> None:
        self.last = Signal(width, name=f"{name}_m1")
        self.before = Signal(width, name=f"{name}_m2")

    def take(self, count: Value) -> list:
        """The assignments that load both registers from ``count``."""
        return [self.last.eq(count - 1), self.before.eq(count - 2)]


def stage(m: Module, name: str, value, shape=None) -> Signal:
    """``value`` in a register of the next pipeline stage: the value a cycle later (a
    view keeps its layout; ``shape`` overrides)."""
    if shape is None:
        shape = value.shape() if hasattr(value, "shape") else Value.cast(value).shape()
    sig = Signal(shape, name=name)
    m.d.sync += sig.eq(value)
    return sig


def delayed(m: Module, name: str, value, cycles: int):
    """``value`` ``cycles`` cycles later, through that many registers (``value`` itself
    for 0)."""
    for i in range(cycles):
        value = stage(m, f"{name}_d{i}", value)
    return value


def shift_right_stages(m: Module, name: str, x, amount, width: int) -> Signal:
    """``x >> amount`` (arithmetic where ``x`` is signed; ``amount`` unsigned) in two
    register stages, by the amount's high bits then by its low three (a multiplexer of at
    most eight inputs per bit each); the result's low ``width`` bits, two cycles after
    ``x`` and ``amount``."""
    coarse = stage(m, f"{name}_coarse", x >> Cat(Const(0, 3), amount[3:]))
    low = stage(m, f"{name}_amount_low", amount[:3])
    return stage(m, f"{name}_shifted", (coarse >> low)[:width])
