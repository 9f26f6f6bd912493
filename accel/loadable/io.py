"""Bytes <-> :class:`~accel.loadable.model.Loadable` through the flatbuffer bindings.

>>> from accel.loadable.model import Loadable, Blob
>>> data = write_loadable(Loadable(blobs=[Blob("w", b"\\x01\\x02")]))
>>> read_loadable(data).blobs[0]
Blob(name='w', data=b'\\x01\\x02', interface=0, sub_interface=0, version=(0, 0, 0), size=2)
"""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np

from accel.errors import AccelInputError
from accel.loadable import model as m
from accel.loadable.nvdla.loadable import (
    AddressListEntry,
    Blob,
    EventListEntry,
    Loadable,
    MemoryListEntry,
    RelocListEntry,
    SubmitListEntry,
    TaskListEntry,
    TensorDescListEntry,
)
from accel.loadable.nvdla.loadable.Version import CreateVersion


class LoadableError(AccelInputError, ValueError):
    """The bytes are not a well-formed NVDLA loadable."""


# ------------------------------------------------------------------ reading
def _str(value: bytes | None) -> str:
    return value.decode("utf-8") if value is not None else ""


def _u16s(obj: object, name: str) -> list[int]:
    if getattr(obj, name + "Length")() == 0:
        return []
    return [int(v) for v in getattr(obj, name + "AsNumpy")()]


def _version(v: object | None) -> tuple[int, int, int]:
    return (v.Major(), v.Minor(), v.SubMinor()) if v is not None else (0, 0, 0)


def _items(root: object, name: str) -> list[object]:
    return [getattr(root, name)(i) for i in range(getattr(root, name + "Length")())]


def read_loadable(data: bytes | bytearray | memoryview) -> m.Loadable:
    """Parse the flatbuffer bytes of a loadable.

    Raises
    ------
    LoadableError
        When the buffer is too short, an offset points outside it, or the
        required ``version`` is missing.
    """
    buf = bytes(data)
    if len(buf) < 8:
        raise LoadableError(f"loadable is {len(buf)} bytes; a flatbuffer needs at least 8")
    root_off = struct.unpack_from("<I", buf, 0)[0]
    if root_off + 4 > len(buf):
        raise LoadableError(f"root table offset {root_off} is outside the {len(buf)}-byte buffer "
                            f"(truncated or not a loadable)")
    try:
        return _read(buf)
    except LoadableError:
        raise
    except (IndexError, struct.error, ValueError, UnicodeDecodeError, TypeError) as exc:
        raise LoadableError(f"malformed loadable ({len(buf)} bytes): {exc}") from exc


def _read(buf: bytes) -> m.Loadable:
    root = Loadable.Loadable.GetRootAs(buf, 0)
    if root.Version() is None:
        raise LoadableError("loadable has no version (required by the schema)")
    out = m.Loadable(version=_version(root.Version()))
    for t in _items(root, "TaskList"):
        out.task_list.append(m.TaskListEntry(
            id=t.Id(), interface=t.Interface(), instance=t.Instance(),
            address_list=_u16s(t, "AddressList"), pre_actions=_u16s(t, "PreActions"),
            post_actions=_u16s(t, "PostActions")))
    for e in _items(root, "MemoryList"):
        out.memory_list.append(m.MemoryListEntry(
            id=e.Id(), domain=e.Domain(), flags=m.MemoryFlags(e.Flags()), size=e.Size(),
            alignment=e.Alignment(),
            contents=[_str(e.Contents(j)) for j in range(e.ContentsLength())],
            offsets=[int(e.Offsets(j)) for j in range(e.OffsetsLength())],
            bind_id=e.BindId(), tensor_desc_id=e.TensorDescId()))
    for a in _items(root, "AddressList"):
        out.address_list.append(m.AddressListEntry(a.Id(), a.MemId(), a.Offset(), a.Size()))
    for e in _items(root, "EventList"):
        out.event_list.append(m.EventListEntry(e.Id(), e.Type(), e.Target(), e.Val(), e.Op()))
    for b in _items(root, "Blobs"):
        n = b.DataLength()
        payload = b.DataAsNumpy().tobytes() if n else b""
        if len(payload) != n:
            raise LoadableError(f"blob {_str(b.Name())!r} data is truncated")
        out.blobs.append(m.Blob(name=_str(b.Name()), data=payload, interface=b.Interface(),
                                sub_interface=b.SubInterface(), version=_version(b.Version()),
                                size=b.Size()))
    for t in _items(root, "TensorDescList"):
        out.tensor_desc_list.append(m.TensorDescListEntry(
            name=_str(t.Name()), id=t.Id(), mem_id=t.MemId(), size=t.Size(), offset=t.Offset(),
            data_format=t.DataFormat(), data_type=t.DataType(), data_category=t.DataCategory(),
            pixel_format=t.PixelFormat(), pixel_mapping=t.PixelMapping(),
            n=t.N(), c=t.C(), h=t.H(), w=t.W(),
            strides=[getattr(t, f"Stride{k}")() for k in range(8)]))
    for r in _items(root, "RelocList"):
        out.reloc_list.append(m.RelocListEntry(r.AddressId(), r.WriteId(), r.Offset(),
                                               r.Interface(), r.SubInterface(), r.RelocType()))
    for s in _items(root, "SubmitList"):
        out.submit_list.append(m.SubmitListEntry(s.Id(), _u16s(s, "TaskId")))
    return out


# ------------------------------------------------------------------ writing
def _vec(b: flatbuffers.Builder, values: list[int], dtype: str) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=dtype))


def _offsets_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def write_loadable(loadable: m.Loadable) -> bytes:
    """Serialize ``loadable`` to flatbuffer bytes the official runtime can parse."""
    b = flatbuffers.Builder(1024)

    tasks = []
    for t in loadable.task_list:
        addr = _vec(b, t.address_list, "<u2")
        pre = _vec(b, t.pre_actions, "<u2")
        post = _vec(b, t.post_actions, "<u2")
        TaskListEntry.Start(b)
        TaskListEntry.AddId(b, t.id)
        TaskListEntry.AddInterface(b, int(t.interface))
        TaskListEntry.AddInstance(b, t.instance)
        TaskListEntry.AddAddressList(b, addr)
        TaskListEntry.AddPreActions(b, pre)
        TaskListEntry.AddPostActions(b, post)
        tasks.append(TaskListEntry.End(b))

    mems = []
    for e in loadable.memory_list:
        names = _offsets_vector(b, [b.CreateString(c) for c in e.contents])
        offs = _vec(b, e.offsets, "<u8")
        MemoryListEntry.Start(b)
        MemoryListEntry.AddId(b, e.id)
        MemoryListEntry.AddDomain(b, int(e.domain))
        MemoryListEntry.AddFlags(b, int(e.flags))
        MemoryListEntry.AddSize(b, e.size)
        MemoryListEntry.AddAlignment(b, e.alignment)
        MemoryListEntry.AddContents(b, names)
        MemoryListEntry.AddOffsets(b, offs)
        MemoryListEntry.AddBindId(b, e.bind_id)
        MemoryListEntry.AddTensorDescId(b, e.tensor_desc_id)
        mems.append(MemoryListEntry.End(b))

    addrs = []
    for a in loadable.address_list:
        AddressListEntry.Start(b)
        AddressListEntry.AddId(b, a.id)
        AddressListEntry.AddMemId(b, a.mem_id)
        AddressListEntry.AddOffset(b, a.offset)
        AddressListEntry.AddSize(b, a.size)
        addrs.append(AddressListEntry.End(b))

    events = []
    for e in loadable.event_list:
        EventListEntry.Start(b)
        EventListEntry.AddId(b, e.id)
        EventListEntry.AddType(b, e.type)
        EventListEntry.AddTarget(b, e.target)
        EventListEntry.AddVal(b, e.val)
        EventListEntry.AddOp(b, int(e.op))
        events.append(EventListEntry.End(b))

    blobs = []
    for bl in loadable.blobs:
        name = b.CreateString(bl.name)
        data = b.CreateNumpyVector(np.frombuffer(bytes(bl.data), dtype=np.uint8))
        Blob.Start(b)
        Blob.AddName(b, name)
        Blob.AddSize(b, bl.size if bl.size is not None else len(bl.data))
        Blob.AddInterface(b, int(bl.interface))
        Blob.AddSubInterface(b, int(bl.sub_interface))
        Blob.AddVersion(b, CreateVersion(b, *bl.version))
        Blob.AddData(b, data)
        blobs.append(Blob.End(b))

    tds = []
    for t in loadable.tensor_desc_list:
        if len(t.strides) != 8:
            raise ValueError(f"tensor {t.name!r} needs 8 strides, got {len(t.strides)}")
        name = b.CreateString(t.name)
        TensorDescListEntry.Start(b)
        TensorDescListEntry.AddName(b, name)
        TensorDescListEntry.AddId(b, t.id)
        TensorDescListEntry.AddMemId(b, t.mem_id)
        TensorDescListEntry.AddSize(b, t.size)
        TensorDescListEntry.AddOffset(b, t.offset)
        TensorDescListEntry.AddDataFormat(b, int(t.data_format))
        TensorDescListEntry.AddDataType(b, int(t.data_type))
        TensorDescListEntry.AddDataCategory(b, int(t.data_category))
        TensorDescListEntry.AddPixelFormat(b, int(t.pixel_format))
        TensorDescListEntry.AddPixelMapping(b, int(t.pixel_mapping))
        TensorDescListEntry.AddN(b, t.n)
        TensorDescListEntry.AddC(b, t.c)
        TensorDescListEntry.AddH(b, t.h)
        TensorDescListEntry.AddW(b, t.w)
        for k, stride in enumerate(t.strides):
            getattr(TensorDescListEntry, f"AddStride{k}")(b, stride)
        tds.append(TensorDescListEntry.End(b))

    relocs = []
    for r in loadable.reloc_list:
        RelocListEntry.Start(b)
        RelocListEntry.AddAddressId(b, r.address_id)
        RelocListEntry.AddWriteId(b, r.write_id)
        RelocListEntry.AddOffset(b, r.offset)
        RelocListEntry.AddInterface(b, int(r.interface))
        RelocListEntry.AddSubInterface(b, r.sub_interface)
        RelocListEntry.AddRelocType(b, r.reloc_type)
        relocs.append(RelocListEntry.End(b))

    submits = []
    for s in loadable.submit_list:
        ids = _vec(b, s.task_id, "<u2")
        SubmitListEntry.Start(b)
        SubmitListEntry.AddId(b, s.id)
        SubmitListEntry.AddTaskId(b, ids)
        submits.append(SubmitListEntry.End(b))

    vectors = [_offsets_vector(b, items) for items in
               (tasks, mems, addrs, events, blobs, tds, relocs, submits)]
    Loadable.Start(b)
    Loadable.AddVersion(b, CreateVersion(b, *loadable.version))
    for add, vec in zip((Loadable.AddTaskList, Loadable.AddMemoryList, Loadable.AddAddressList,
                         Loadable.AddEventList, Loadable.AddBlobs, Loadable.AddTensorDescList,
                         Loadable.AddRelocList, Loadable.AddSubmitList), vectors, strict=True):
        add(b, vec)
    b.Finish(Loadable.End(b))
    return bytes(b.Output())
