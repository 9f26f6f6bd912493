"""DRAM: a sparse, bounds-checked byte memory shared by the host and the DMA units.

Memory exists only where a region has been mapped (``map``), as in NVDLA's
trace player where ``mem_init`` declares every surface.  An access that is not
wholly inside one mapped region is a bug in the register programming (a wrong
stride or base), so it raises :class:`DramAccessError` naming the unit that
made it and the byte range, instead of silently reading zeros.

>>> d = Dram()
>>> d.map(0x1000, 16, "src")
>>> d.write(0x1004, b"\\x01\\x02")
>>> d.read(0x1003, 4).tolist()
[0, 1, 2, 0]
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from accel.errors import AccelError


class DramAccessError(AccelError):
    """An access outside every mapped region; the message names unit and address range."""


@dataclass
class _Region:
    base: int
    data: np.ndarray  # uint8
    name: str
    version: int = 0  # counts the writes into the region (host and DMA)

    @property
    def end(self) -> int:
        return self.base + self.data.size


class Dram:
    """Byte-addressed memory made of non-overlapping zero-filled regions."""

    def __init__(self) -> None:
        self._regions: list[_Region] = []  # sorted by base
        self._bases: list[int] = []
        # (base, shape, strides, writeable) -> view: the same cube is read or written on
        # every inference; views stay valid until a merge replaces a region's array
        self._views: dict[tuple, np.ndarray] = {}
        # addresses -> the distinct regions holding them (None: unmapped), for versions();
        # cleared with the views whenever map() replaces regions
        self._holders: dict[tuple[int, ...], tuple[_Region | None, ...]] = {}

    def map(self, base: int, size: int, name: str = "") -> None:
        """Map ``size`` zero bytes at ``base``.

        Re-mapping a range wholly inside an existing region zero-fills it
        (NVDLA traces ``mem_init`` the same surface twice); a partial overlap
        with an existing region merges them into one region.
        """
        if base < 0 or size <= 0:
            raise ValueError(f"cannot map base={base:#x} size={size}: need base >= 0, size > 0")
        end = base + size
        touching = [r for r in self._regions if r.base < end and base < r.end]
        if len(touching) == 1 and touching[0].base <= base and end <= touching[0].end:
            r = touching[0]
            r.data[base - r.base:end - r.base] = 0
            r.version += 1
            return
        self._views.clear()
        self._holders.clear()
        lo = min([base] + [r.base for r in touching])
        hi = max([end] + [r.end for r in touching])
        data = np.zeros(hi - lo, dtype=np.uint8)
        for r in touching:  # keep the contents of the regions being merged
            data[r.base - lo:r.end - lo] = r.data
            self._regions.remove(r)
        data[base - lo:end - lo] = 0
        version = 1 + max((r.version for r in touching), default=0)
        self._regions.append(_Region(lo, data, name or (touching[0].name if touching else ""),
                                     version))
        self._regions.sort(key=lambda r: r.base)
        self._bases = [r.base for r in self._regions]

    @property
    def regions(self) -> list[tuple[int, int, str]]:
        """``(base, size, name)`` of every mapped region, by address."""
        return [(r.base, r.data.size, r.name) for r in self._regions]

    def version(self, addr: int) -> int:
        """How many times the region holding ``addr`` has been written (-1: unmapped).

        Anything derived from memory contents (a decoded descriptor, unpacked
        weights) stays valid while the version of its region does not change.
        """
        i = bisect.bisect_right(self._bases, addr) - 1
        if i >= 0 and addr < self._regions[i].end:
            return self._regions[i].version
        return -1

    def versions(self, addrs: tuple[int, ...]) -> tuple[int, ...]:
        """:meth:`version` of each distinct region holding one of ``addrs`` (-1 for the
        unmapped ones): unchanged exactly when nothing was written into them.  Cheaper than
        :meth:`version` per address when many lie in a few regions; which regions hold
        them is looked up once per mapping."""
        holders = self._holders.get(addrs)
        if holders is None:
            found: dict[int, _Region | None] = {}
            for a in addrs:
                i = bisect.bisect_right(self._bases, a) - 1
                r = self._regions[i] if i >= 0 and a < self._regions[i].end else None
                found.setdefault(id(r), r)
            if len(self._holders) >= 4096:
                self._holders.clear()
            holders = self._holders[addrs] = tuple(found.values())
        return tuple(-1 if r is None else r.version for r in holders)

    def _region(self, addr: int, size: int, unit: str, what: str) -> _Region:
        i = bisect.bisect_right(self._bases, addr) - 1
        if size >= 0 and i >= 0:
            r = self._regions[i]
            if addr + size <= r.end:
                return r
        mapped = ", ".join(f"{b:#x}+{s:#x}" for b, s, _ in self.regions) or "none"
        raise DramAccessError(
            f"{unit}: {what} of {size} bytes at [{addr:#x}, {addr + size:#x}) is outside the "
            f"mapped DRAM regions ({mapped})")

    def strided(self, base: int, shape: tuple[int, ...], strides: tuple[int, ...],
                unit: str, what: str = "read") -> np.ndarray | None:
        """A uint8 view ``[i, j, ...] -> base + sum(index * stride)`` of one region, or None
        when the span leaves the region holding ``base`` (callers then gather, which
        names the bad address).  Strides are non-negative byte counts."""
        key = (base, shape, strides, what == "write")
        view = self._views.get(key)
        if view is not None:
            return view
        span = sum((n - 1) * st for n, st in zip(shape, strides, strict=True)) + 1
        i = bisect.bisect_right(self._bases, base) - 1
        if i < 0 or min(shape) <= 0:
            return None
        r = self._regions[i]
        if base + span > r.end:
            return None
        view = np.ndarray(shape, np.uint8, buffer=r.data, offset=base - r.base,
                          strides=strides)   # (np.ndarray is as_strided without its overhead)
        if what != "write":
            view.flags.writeable = False
        if len(self._views) >= 4096:
            self._views.clear()
        self._views[key] = view
        return view

    def touched(self, base: int, writes: int = 1) -> None:
        """Count ``writes`` made through a :meth:`strided` view into the region of ``base``."""
        self._region(base, 0, "host", "write").version += writes

    def write(self, addr: int, data, unit: str = "host") -> None:
        """Write ``data`` (bytes or a uint8 array) at ``addr``."""
        buf = np.frombuffer(bytes(data), dtype=np.uint8) if isinstance(
            data, (bytes, bytearray, memoryview)) else np.asarray(data, dtype=np.uint8).ravel()
        r = self._region(addr, buf.size, unit, "write")
        r.data[addr - r.base:addr - r.base + buf.size] = buf
        r.version += 1

    def read(self, addr: int, size: int, unit: str = "host") -> np.ndarray:
        """Copy of ``size`` bytes at ``addr`` as a uint8 array."""
        r = self._region(addr, size, unit, "read")
        return r.data[addr - r.base:addr - r.base + size].copy()

    def gather(self, base: int, offsets: np.ndarray, unit: str) -> np.ndarray:
        """Bytes at ``base + offsets`` (any shape) - one bounds check for the whole span."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.size == 0:
            return np.zeros(offsets.shape, dtype=np.uint8)
        lo, hi = int(offsets.min()), int(offsets.max())
        r = self._region(base + lo, hi - lo + 1, unit, "read")
        return r.data[offsets + (base - r.base)]

    def scatter(self, base: int, offsets: np.ndarray, values: np.ndarray, unit: str) -> None:
        """Write ``values`` to ``base + offsets`` (same shape) with one bounds check."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.size == 0:
            return
        lo, hi = int(offsets.min()), int(offsets.max())
        r = self._region(base + lo, hi - lo + 1, unit, "write")
        r.data[offsets + (base - r.base)] = np.asarray(values).astype(np.uint8)
        r.version += 1
