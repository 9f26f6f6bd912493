"""``opendla inspect LOADABLE``: print a loadable's memories, tasks, ops and tensors."""

from __future__ import annotations

import argparse
import json
import struct
from enum import IntEnum
from pathlib import Path
from typing import Any

from accel.loadable.containers import decode_dep_graph, decode_op, decode_surface, op_name
from accel.loadable.descriptors import NetworkDesc
from accel.loadable.io import LoadableError, read_loadable
from accel.loadable.manifest import ChecksumError, read_manifest, verify_checksums
from accel.loadable.model import (
    BlobSubInterface,
    DataCategory,
    DataFormat,
    DataType,
    EventOp,
    Interface,
    Loadable,
    MemoryDomain,
    MemoryFlags,
    PixelFormat,
)
from accel.loadable.surfaces import INTERFACE_V12
from opendla.errors import UsageError

#: the errors a malformed loadable raises while its descriptors are decoded
DECODE_ERRORS = (LoadableError, KeyError, ValueError, IndexError, struct.error)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("inspect", help="print the contents of an NVDLA loadable",
                              description=__doc__)
    p.add_argument("loadable", type=Path, help="loadable file (flatbuffer)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-ops", action="store_true", help="skip decoding the task descriptors")


def _flags(v: int) -> str:
    return "|".join(f.name for f in MemoryFlags if f and v & f) or "NONE"


def _name(enum: type[IntEnum], v: int) -> str:
    """The enum member's name, or the number with a note when the schema has none."""
    try:
        return enum(v).name
    except ValueError:
        return f"{v} (not a {enum.__name__})"


def _task_ops(ld: Loadable, task_address_list: list[int]) -> dict[str, Any] | None:
    """Decode the DLA1 descriptors of a task from its blobs (via address list -> memory)."""
    addr = {a.id: a for a in ld.address_list}
    blob_of = {}
    for i, aid in enumerate(task_address_list):
        mem = ld.memory(addr[aid].mem_id)
        names = [c for c in mem.contents if c]
        if names:
            blob_of[i] = ld.blob(names[0])
    if 0 not in blob_of:
        return None
    net = NetworkDesc.unpack(blob_of[0].data)
    version = next((b.version for b in blob_of.values()
                    if b.sub_interface == BlobSubInterface.SURF_LIST), INTERFACE_V12)
    dep = blob_of[net.dependency_graph_index].data
    opl = blob_of[net.operation_desc_index].data
    srf = blob_of[net.surface_desc_index].data
    ops = []
    for i, common in enumerate(decode_dep_graph(dep, net.num_operations)):
        entry: dict[str, Any] = {"index": i, "type": op_name(common.op_type),
                                 "common": common.to_dict()}
        try:
            entry["op"] = decode_op(common.op_type, opl, i).to_dict()
            entry["surface"] = decode_surface(common.op_type, srf, i, version).to_dict()
        except ValueError as exc:
            entry["error"] = str(exc)
        ops.append(entry)
    return {"network": net.to_dict(), "interface_version": list(version), "ops": ops}


def _manifest(ld: Loadable) -> dict[str, Any] | None:
    """The manifest (None for loadables without one, such as NVIDIA's) and which blobs,
    if any, no longer match its checksums."""
    manifest = read_manifest(ld)
    if manifest is None:
        return None
    try:
        verify_checksums(ld, manifest)
        altered: list[str] = []
    except ChecksumError as exc:
        altered = exc.blobs
    return {"preset": manifest.preset,
            "inputs": [t.as_dict() for t in manifest.inputs],
            "outputs": [t.as_dict() for t in manifest.outputs],
            "sha256": manifest.checksums, "checksums_ok": not altered, "altered_blobs": altered}


def describe(ld: Loadable, with_ops: bool = True) -> dict[str, Any]:
    """A JSON-able summary of ``ld``."""
    out: dict[str, Any] = {
        "version": list(ld.version),
        "memories": [{"id": m.id, "flags": _flags(m.flags),
                      "domain": _name(MemoryDomain, m.domain), "size": m.size,
                      "alignment": m.alignment, "contents": m.contents, "offsets": m.offsets,
                      "bind_id": m.bind_id, "tensor_desc_id": m.tensor_desc_id}
                     for m in ld.memory_list],
        "addresses": [vars(a) for a in ld.address_list],
        "blobs": [{"name": b.name, "size": b.size, "interface": _name(Interface, b.interface),
                   "sub_interface": _name(BlobSubInterface, b.sub_interface),
                   "version": list(b.version)}
                  for b in ld.blobs],
        "tensors": [{**vars(t), "data_format": _name(DataFormat, t.data_format),
                     "data_type": _name(DataType, t.data_type),
                     "data_category": _name(DataCategory, t.data_category),
                     "pixel_format": _name(PixelFormat, t.pixel_format)}
                    for t in ld.tensor_desc_list],
        "events": [{**vars(e), "op": _name(EventOp, e.op)} for e in ld.event_list],
        "submit": [vars(s) for s in ld.submit_list],
        "tasks": [],
        "manifest": _manifest(ld),
    }
    for t in ld.task_list:
        task: dict[str, Any] = {"id": t.id, "interface": _name(Interface, t.interface),
                                "instance": t.instance,
                                "address_list": t.address_list, "pre_actions": t.pre_actions,
                                "post_actions": t.post_actions}
        if with_ops and t.interface == Interface.DLA1:
            try:
                task["dla"] = _task_ops(ld, t.address_list)
            except DECODE_ERRORS as exc:
                msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
                raise LoadableError(f"task {t.id}: cannot decode its descriptors: {msg}") \
                    from None
        out["tasks"].append(task)
    return out


def _fmt_struct(d: dict[str, Any]) -> str:
    def flat(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + " ".join(f"{k}={flat(x)}" for k, x in v.items()
                                  if x not in (0, [0, 0], [0, 0, 0])) + "}"
        return str(v)
    return flat(d)


def _shorten(names: list[str], keep: int = 4) -> str:
    """The first ``keep`` names and how many more (``--json`` lists them all)."""
    more = f", ... (+{len(names) - keep} more)" if len(names) > keep else ""
    return ", ".join(names[:keep]) + more


def _print_manifest(man: dict[str, Any] | None) -> None:
    if man is None:
        print("manifest: none (not written by 'opendla compile'; run takes int8 arrays)")
        return
    print(f"manifest: preset {man['preset']}, {len(man['sha256'])} blob checksums (SHA-256) "
          + ("match" if man["checksums_ok"] else
             f"DO NOT MATCH for {', '.join(man['altered_blobs'])}"))
    for kind in ("inputs", "outputs"):
        for t in man[kind]:
            print(f"  {kind[:-1]:<6} {t['name']} {'x'.join(map(str, t['shape']))} "
                  f"scale {t['scale']:.9g} zero point {t['zero_point']}")


def _print_text(path: Path, d: dict[str, Any]) -> None:
    print(f"{path}: loadable {'.'.join(map(str, d['version']))}")
    print(f"memories ({len(d['memories'])}):")
    print(f"  {'id':>3} {'flags':<16} {'size':>8} {'bind':>4} {'tdesc':>5}  contents")
    for m in d["memories"]:
        print(f"  {m['id']:>3} {m['flags']:<16} {m['size']:>8} {m['bind_id']:>4} "
              f"{m['tensor_desc_id']:>5}  {_shorten([c for c in m['contents'] if c])}")
    print(f"blobs ({len(d['blobs'])}):")
    for b in d["blobs"]:
        print(f"  {b['name']:<24} {b['size']:>8} B  {b['interface']}/{b['sub_interface']} "
              f"v{'.'.join(map(str, b['version']))}")
    print("tensors:")
    for t in d["tensors"]:
        print(f"  {t['id']} {t['name']} mem={t['mem_id']} {t['n']}x{t['c']}x{t['h']}x{t['w']} "
              f"{t['data_type']} {t['data_format']} {t['pixel_format']} size={t['size']} "
              f"strides={t['strides'][:3]}")
    print(f"submit: {[s['task_id'] for s in d['submit']]}")
    _print_manifest(d["manifest"])
    for t in d["tasks"]:
        print(f"task {t['id']}: {t['interface']} addresses={t['address_list']}")
        dla = t.get("dla")
        if not dla:
            continue
        net = dla["network"]
        print(f"  network: ops={net['num_operations']} op_head={net['op_head']} "
              f"(firmware interface {'.'.join(map(str, dla['interface_version']))})")
        for op in dla["ops"]:
            c = op["common"]
            cons = [(k, x["index"], x["event"]) for k, x in enumerate(c["consumers"])
                    if x["index"] >= 0]
            print(f"  op {op['index']} {op['type']}: deps={c['dependency_count']} "
                  f"consumers={cons} fused_parent={c['fused_parent']['index']}")
            if "error" in op:
                print(f"    error: {op['error']}")
                continue
            print(f"    op:      {_fmt_struct(op['op'])}")
            print(f"    surface: {_fmt_struct(op['surface'])}")


def run(args: argparse.Namespace) -> int:
    try:
        ld = read_loadable(args.loadable.read_bytes())
        d = describe(ld, with_ops=not args.no_ops)
    except (OSError, LoadableError) as exc:
        raise UsageError(f"{args.loadable}: {exc}") from None
    if args.json:
        print(json.dumps(d, indent=1, default=int))
    else:
        _print_text(args.loadable, d)
    return 0
