"""Declarative little-endian C structs: dataclasses that pack to exact bytes.

The firmware descriptors in ``dla_interface.h`` are all ``__packed
__aligned(4)``: members follow each other with no padding, and ``sizeof`` is
rounded up to a multiple of 4.  A :class:`CStruct` subclass decorated with
:func:`cstruct` declares each member with :func:`member`, giving a
:mod:`struct` code (``"h"``, ``"B"``...), a nested :class:`CStruct` type, and an
optional array length.

>>> @cstruct
... class Pair(CStruct):
...     a: int = member("h")
...     b: int = member("B")
>>> Pair.SIZE, Pair(a=-2, b=7).pack()
(4, b'\\xfe\\xff\\x07\\x00')
>>> Pair.unpack(b'\\xfe\\xff\\x07\\x00')
Pair(a=-2, b=7)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound="CStruct")


def member(ctype: str | type[CStruct], count: int | None = None) -> Any:
    """Declare a struct member: a :mod:`struct` code or a nested CStruct type.

    ``count`` makes it a fixed-length array (a list in Python).
    """
    if isinstance(ctype, str):
        if count is None:
            return field(default=0, metadata={"ctype": ctype, "count": None})
        return field(default_factory=lambda: [0] * count,
                     metadata={"ctype": ctype, "count": count})
    if count is None:
        return field(default_factory=ctype, metadata={"ctype": ctype, "count": None})
    return field(default_factory=lambda: [ctype() for _ in range(count)],
                 metadata={"ctype": ctype, "count": count})


def _member_size(ctype: str | type[CStruct]) -> int:
    return struct.calcsize("<" + ctype) if isinstance(ctype, str) else ctype.PACKED_SIZE


class CStruct:
    """Base of the packed descriptor dataclasses (see module docstring)."""

    #: bytes of the members without the trailing alignment padding
    PACKED_SIZE: ClassVar[int]
    #: ``sizeof``: PACKED_SIZE rounded up to ALIGN
    SIZE: ClassVar[int]
    ALIGN: ClassVar[int] = 4

    _LAYOUT: ClassVar[list[tuple[str, str | type[CStruct], int | None, int]]]

    @classmethod
    def _layout(cls) -> list[tuple[str, str | type[CStruct], int | None, int]]:
        """(name, ctype, count, byte offset) of each member."""
        return cls._LAYOUT

    @classmethod
    def offset_of(cls, name: str) -> int:
        """Byte offset of member ``name`` (like C ``offsetof``)."""
        for fname, _, _, offset in cls._layout():
            if fname == name:
                return offset
        raise KeyError(f"{cls.__name__} has no member {name!r}")

    def pack(self) -> bytes:
        """The C bytes of this struct, ``SIZE`` long, little-endian."""
        out = bytearray()
        for name, ctype, count, _ in self._layout():
            value = getattr(self, name)
            items = value if count is not None else [value]
            if count is not None and len(items) != count:
                raise ValueError(f"{type(self).__name__}.{name} needs {count} items, "
                                 f"got {len(items)}")
            for item in items:
                if isinstance(ctype, str):
                    try:
                        out += struct.pack("<" + ctype, item)
                    except struct.error as exc:
                        raise ValueError(f"{type(self).__name__}.{name}={item!r} does not fit "
                                         f"C type {ctype!r}: {exc}") from None
                else:
                    out += item.pack()[: ctype.PACKED_SIZE]
        return bytes(out) + bytes(self.SIZE - len(out))

    @classmethod
    def unpack(cls: type[T], data: bytes | bytearray | memoryview, offset: int = 0) -> T:
        """Decode one struct from ``data`` at byte ``offset``."""
        layout = cls._layout()
        if len(data) - offset < cls.PACKED_SIZE:
            raise ValueError(f"{cls.__name__} needs {cls.PACKED_SIZE} bytes at offset {offset}, "
                             f"only {len(data) - offset} available")
        kwargs = {}
        for name, ctype, count, moff in layout:
            step = _member_size(ctype)
            items = []
            for i in range(count or 1):
                pos = offset + moff + i * step
                if isinstance(ctype, str):
                    items.append(struct.unpack_from("<" + ctype, data, pos)[0])
                else:
                    items.append(ctype.unpack(data, pos))
            kwargs[name] = items if count is not None else items[0]
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict (for JSON output)."""
        def conv(v: Any) -> Any:
            if isinstance(v, CStruct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v
        return {name: conv(getattr(self, name)) for name, *_ in self._layout()}


def cstruct(cls: type[T]) -> type[T]:
    """Class decorator: make ``cls`` a dataclass and compute its C layout."""
    cls = dataclass(cls)
    layout, offset = [], 0
    for f in fields(cls):
        ctype, count = f.metadata["ctype"], f.metadata["count"]
        layout.append((f.name, ctype, count, offset))
        offset += _member_size(ctype) * (count or 1)
    cls._LAYOUT = layout
    cls.PACKED_SIZE = offset
    cls.SIZE = -(-offset // cls.ALIGN) * cls.ALIGN
    return cls
