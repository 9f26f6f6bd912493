"""CSB register file: every unit's registers with NVDLA's two D_ register groups.

Each unit has single-instance ``S_`` registers and two copies (groups 0/1) of
its ``D_`` registers.  ``S_POINTER.PRODUCER`` selects the group that CSB writes
and reads of ``D_`` registers reach; ``S_POINTER.CONSUMER`` is the group the
hardware executes next and flips when an operation completes.  Software can
only change the writable bits of a register (RDL ``sw = rw|w``); read-only
fields hold values the hardware sets (``set_hw``).
"""

from __future__ import annotations

from operator import itemgetter

from accel.regs import UNITS, Register, Unit


class UnitRegs:
    """The registers of one unit."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self._single: dict[int, int] = {}
        self._groups: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self._wmask: dict[int, int] = {}
        for reg in unit.registers.values():
            target = self._groups if reg.name.startswith("D_") else (self._single,)
            for store in target:
                store[reg.offset] = reg.reset
            self._wmask[reg.offset] = sum(f.mask for f in reg.fields if "w" in f.access)
        self._d_offsets = frozenset(self._groups[0])
        self._has_pointer = "S_POINTER" in unit.registers
        op_enable = unit.registers.get("D_OP_ENABLE")
        self._op_enable = op_enable.offset if op_enable is not None else None
        #: ``D_`` registers software programs (read-only ones, e.g. the perf counters the
        #: hardware sets after each op, are results, not configuration)
        self.config_offsets = tuple(off for off in self._groups[0] if self._wmask[off])
        offs = self.config_offsets
        # itemgetter of several keys gives a tuple; of one, the bare value
        self._config = (itemgetter(*offs) if len(offs) > 1
                        else lambda store: tuple(store[o] for o in offs))

    def config(self, group: int) -> tuple:
        """The values of the configuration registers of ``group``, in a fixed order."""
        return self._config(self._groups[group])

    @property
    def groups(self) -> tuple[dict[int, int], dict[int, int]]:
        """The two ``D_`` register groups (offset -> value): what the hardware executes from."""
        return self._groups

    def stores(self) -> tuple[dict[int, int], ...]:
        """Every dict holding the unit's registers: the single ones, then groups 0 and 1."""
        return (self._single, *self._groups)

    @property
    def pointer_offset(self) -> int | None:
        """Offset of S_POINTER in the single registers (None: the unit has no groups)."""
        return 4 if self._has_pointer else None

    def enabled(self) -> bool:
        """``D_OP_ENABLE.OP_EN`` of the consumer group: its op may start."""
        return self._op_enable is not None and bool(
            self._groups[self.consumer][self._op_enable] & 1)

    def finish(self) -> None:
        """An op completed: clear its enable and move the consumer to the other group."""
        if not self._has_pointer:
            if self._op_enable is not None:
                self._groups[0][self._op_enable] = 0
            return
        pointer = self._single[4]
        if self._op_enable is not None:
            self._groups[(pointer >> 16) & 1][self._op_enable] = 0
        self._single[4] = pointer ^ (1 << 16)

    # --- group pointers --------------------------------------------------------------
    @property
    def producer(self) -> int:
        return self._single[4] & 1 if self._has_pointer else 0

    @property
    def consumer(self) -> int:
        return (self._single[4] >> 16) & 1 if self._has_pointer else 0

    def flip_consumer(self) -> None:
        if self._has_pointer:
            self._single[4] ^= 1 << 16

    # --- CSB access ------------------------------------------------------------------
    def store_of(self, reg: Register, group: int) -> dict[int, int]:
        """The dict holding ``reg`` (a ``D_`` register: in ``group``), keyed by offset."""
        return self._groups[group] if reg.offset in self._d_offsets else self._single

    def write_mask(self, reg: Register) -> int:
        """The software-writable bits of ``reg``."""
        return self._wmask[reg.offset]

    def _store(self, reg: Register, group: int | None) -> dict[int, int]:
        if reg.offset not in self._d_offsets:
            return self._single
        return self._groups[self.producer if group is None else group]

    def write(self, reg: Register, value: int) -> None:
        """A CSB write: only the software-writable bits change."""
        store, mask = self._store(reg, None), self._wmask[reg.offset]
        store[reg.offset] = (store[reg.offset] & ~mask) | (value & mask & 0xFFFFFFFF)

    def read(self, reg: Register, group: int | None = None) -> int:
        return self._store(reg, group)[reg.offset]

    def set_hw(self, name: str, value: int, group: int | None = None) -> None:
        """Hardware update of a whole register, read-only bits included."""
        reg = self.unit.registers[name]
        self._store(reg, group)[reg.offset] = value & 0xFFFFFFFF

    def group(self, group: int) -> GroupView:
        return GroupView(self, group)


class GroupView:
    """Field access to one register group of a unit, as the executing hardware sees it."""

    def __init__(self, regs: UnitRegs, group: int) -> None:
        self.regs, self.group = regs, group

    @property
    def unit_name(self) -> str:
        return self.regs.unit.name

    def reg(self, name: str) -> int:
        return self.regs.read(self.regs.unit.registers[name], self.group)

    def __call__(self, name: str, field: str | None = None) -> int:
        """Value of register ``name`` or of its field ``field``."""
        reg = self.regs.unit.registers[name]
        value = self.regs.read(reg, self.group)
        if field is None:
            return value
        f = reg.field(field)
        return (value >> f.lsb) & ((1 << f.width) - 1)

    def addr(self, low: str, high: str) -> int:
        """64-bit address from a LOW/HIGH register pair."""
        return (self.reg(high) << 32) | self.reg(low)


def make_register_file() -> dict[str, UnitRegs]:
    """Fresh registers (reset values) for every unit of the map."""
    return {name: UnitRegs(unit) for name, unit in UNITS.items()}
