"""Plain dataclass model of an NVDLA loadable (schema ``loadable.fbs``, 0.7.0).

These mirror the flatbuffer tables one to one with snake_case fields, so code
that builds, inspects or runs a loadable never touches flatbuffers;
:mod:`accel.loadable.io` converts to and from bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, IntFlag

LOADABLE_VERSION = (0, 7, 0)


class Interface(IntEnum):
    """Executor of a task or blob."""

    NONE = 0
    DLA1 = 1
    EMU1 = 2


class BlobSubInterface(IntEnum):
    """``Blob.sub_interface`` of DLA1 task blobs, as the official loadables use it."""

    NONE = 0
    NETWORK_DESC = 1
    DEP_GRAPH = 2
    OP_LIST = 3
    SURF_LIST = 4
    LUT_LIST = 5


class MemoryDomain(IntEnum):
    SYSTEM = 0
    SRAM = 1


class MemoryFlags(IntFlag):
    NONE = 0
    ALLOC = 1
    SET = 2
    INPUT = 4
    OUTPUT = 8


class EventOp(IntEnum):
    WAIT = 0
    SIGNAL = 1


class DataFormat(IntEnum):
    UNKNOWN = 0
    NCHW = 1
    NHWC = 2


class DataType(IntEnum):
    UNKNOWN = 0
    FLOAT = 1
    HALF = 2
    INT16 = 3
    INT8 = 4


class DataCategory(IntEnum):
    IMAGE = 0
    WEIGHT = 1
    FEATURE = 2
    PLANAR = 3
    BIAS = 4


class PixelFormat(IntEnum):
    """Only the values the toolchain uses are named; others stay plain ints."""

    R8 = 0
    A8B8G8R8 = 12
    FEATURE = 36
    FEATURE_X8 = 37


@dataclass
class Blob:
    name: str
    data: bytes = b""
    interface: int = Interface.NONE
    sub_interface: int = 0
    version: tuple[int, int, int] = (0, 0, 0)
    size: int | None = None  # None: len(data)

    def __post_init__(self) -> None:
        if self.size is None:
            self.size = len(self.data)


@dataclass
class MemoryListEntry:
    id: int
    size: int
    flags: int = MemoryFlags.ALLOC
    domain: int = MemoryDomain.SYSTEM
    alignment: int = 0
    contents: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    bind_id: int = 0
    tensor_desc_id: int = 0


@dataclass
class AddressListEntry:
    id: int
    mem_id: int
    offset: int = 0
    size: int = 0


@dataclass
class TaskListEntry:
    id: int
    interface: int = Interface.DLA1
    instance: int = -1
    address_list: list[int] = field(default_factory=list)
    pre_actions: list[int] = field(default_factory=list)
    post_actions: list[int] = field(default_factory=list)


@dataclass
class EventListEntry:
    id: int
    type: int = 0
    target: int = 0
    val: int = 0
    op: int = EventOp.WAIT


@dataclass
class SubmitListEntry:
    id: int
    task_id: list[int] = field(default_factory=list)


@dataclass
class TensorDescListEntry:
    name: str
    id: int
    mem_id: int
    size: int
    offset: int = 0
    data_format: int = DataFormat.NCHW
    data_type: int = DataType.INT8
    data_category: int = DataCategory.FEATURE
    pixel_format: int = PixelFormat.FEATURE_X8
    pixel_mapping: int = 0
    n: int = 1
    c: int = 0
    h: int = 0
    w: int = 0
    strides: list[int] = field(default_factory=lambda: [0] * 8)


@dataclass
class RelocListEntry:
    address_id: int
    write_id: int
    offset: int
    interface: int = Interface.DLA1
    sub_interface: int = 0
    reloc_type: int = 0


@dataclass
class Loadable:
    version: tuple[int, int, int] = LOADABLE_VERSION
    task_list: list[TaskListEntry] = field(default_factory=list)
    memory_list: list[MemoryListEntry] = field(default_factory=list)
    address_list: list[AddressListEntry] = field(default_factory=list)
    event_list: list[EventListEntry] = field(default_factory=list)
    blobs: list[Blob] = field(default_factory=list)
    tensor_desc_list: list[TensorDescListEntry] = field(default_factory=list)
    reloc_list: list[RelocListEntry] = field(default_factory=list)
    submit_list: list[SubmitListEntry] = field(default_factory=list)

    def blob(self, name: str) -> Blob:
        """The blob called ``name``; KeyError lists the names present."""
        for b in self.blobs:
            if b.name == name:
                return b
        have = ", ".join(b.name for b in self.blobs)
        raise KeyError(f"blob {name!r} not in loadable (have {have})")

    def memory(self, mem_id: int) -> MemoryListEntry:
        for m in self.memory_list:
            if m.id == mem_id:
                return m
        raise KeyError(f"memory id {mem_id} not in loadable "
                       f"(have {', '.join(str(m.id) for m in self.memory_list)})")

    def tensors(self, flag: MemoryFlags) -> list[tuple[MemoryListEntry, TensorDescListEntry]]:
        """(memory, tensor desc) of each INPUT or OUTPUT memory, in bind-id order."""
        by_id = {t.id: t for t in self.tensor_desc_list}
        found = [(m, by_id.get(m.tensor_desc_id)) for m in self.memory_list if m.flags & flag]
        return sorted(found, key=lambda mt: mt[0].bind_id)
