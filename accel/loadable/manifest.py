"""A loadable's description of itself: preset, bound-tensor quantization, blob checksums.

An int8 loadable alone does not say how to feed it: which hardware preset it
was compiled for, or which scale and zero point turn a float input into the
int8 codes it reads (and its int8 outputs back into floats).  Nor can a
runtime tell a loadable whose weight bytes were altered from a good one.
``opendla compile`` therefore adds one blob, :data:`MANIFEST_BLOB`, holding a
JSON :class:`Manifest` with the preset, each bound input's and output's
name, NCHW shape, scale and zero point, and the SHA-256 of every other blob.

Why a blob of its own and not unused fields: the 0.7.0 schema has no spare
field wide enough (``Blob.version`` and the tensor descriptions' ``stride_3``
to ``stride_7`` are small integers with meanings the official runtime may
read), while a blob that no memory-list entry names in its ``contents`` and
no task's address list reaches is never copied to DLA memory: the runtime
fills SET memories only from the blobs they name (NVDLA_FACTS.md section 4;
:mod:`accel.runtime.umd` does the same).  Its interface is ``NONE``, so no
DLA1 or EMU1 task claims it.  Loadables without a manifest (NVIDIA's) run
as before; :func:`read_manifest` returns None for them.

>>> from accel.loadable.model import Blob, Loadable
>>> ld = Loadable(blobs=[Blob("w", b"\\x01\\x02")])
>>> ld = attach_manifest(ld, "nv_small", [TensorQuant("x", (1, 1, 2, 2), 0.5, 0)], [])
>>> read_manifest(ld).checksums["w"][:8]
'a12871fe'
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from accel.loadable.io import LoadableError
from accel.loadable.model import Blob, Interface, Loadable

#: the name of the manifest blob (recognizable, and unlike NVIDIA's ``task-N-*`` names)
MANIFEST_BLOB = "opendla-manifest"
#: the ``format`` field of the JSON, versioned so a later layout can be told apart
MANIFEST_FORMAT = "opendla-manifest/1"
#: Blob.version of the manifest blob (major 1 = :data:`MANIFEST_FORMAT`)
MANIFEST_VERSION = (1, 0, 0)


class ManifestError(LoadableError):
    """The manifest blob is present but is not a well-formed manifest."""


class ChecksumError(LoadableError):
    """A blob's bytes differ from the SHA-256 the manifest recorded (or it is missing)."""

    def __init__(self, message: str, blobs: Sequence[str]) -> None:
        super().__init__(message)
        self.blobs = list(blobs)


@dataclass(frozen=True)
class TensorQuant:
    """A bound tensor's NCHW shape and int8 encoding: code ``q`` means
    ``(q - zero_point) * scale``."""

    name: str
    shape: tuple[int, ...]
    scale: float
    zero_point: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"tensor {self.name!r}: scale {self.scale!r} must be a positive "
                             f"finite number")
        if not -128 <= self.zero_point <= 127:
            raise ValueError(f"tensor {self.name!r}: zero point {self.zero_point} is outside "
                             f"the int8 range -128..127")

    def as_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "scale": self.scale,
                "zero_point": self.zero_point}


@dataclass(frozen=True)
class Manifest:
    """What :data:`MANIFEST_BLOB` records (see the module docstring)."""

    preset: str
    inputs: tuple[TensorQuant, ...] = ()
    outputs: tuple[TensorQuant, ...] = ()
    checksums: dict[str, str] = field(default_factory=dict)   # blob name -> SHA-256 hex

    def tensor(self, name: str) -> TensorQuant | None:
        """The input or output called ``name``; None when the manifest does not list it."""
        return next((t for t in (*self.inputs, *self.outputs) if t.name == name), None)

    def to_json(self) -> bytes:
        doc = {"format": MANIFEST_FORMAT, "preset": self.preset,
               "inputs": [t.as_dict() for t in self.inputs],
               "outputs": [t.as_dict() for t in self.outputs],
               "sha256": dict(sorted(self.checksums.items()))}
        return json.dumps(doc, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """Parse the blob's bytes; :class:`ManifestError` names what is wrong."""
        try:
            doc = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ManifestError(f"blob {MANIFEST_BLOB!r} is not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
            got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
            raise ManifestError(f"blob {MANIFEST_BLOB!r} has format {got!r}; this version "
                                f"reads {MANIFEST_FORMAT!r}")
        try:
            tensors = {kind: tuple(TensorQuant(str(t["name"]), tuple(int(d) for d in t["shape"]),
                                               float(t["scale"]), int(t["zero_point"]))
                                   for t in doc[kind]) for kind in ("inputs", "outputs")}
            checksums = {str(k): str(v) for k, v in doc["sha256"].items()}
            return cls(str(doc["preset"]), tensors["inputs"], tensors["outputs"], checksums)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ManifestError(f"blob {MANIFEST_BLOB!r} is malformed: "
                                f"{exc.args[0] if exc.args else exc!r}") from None


def blob_sha256(blob: Blob) -> str:
    return hashlib.sha256(bytes(blob.data)).hexdigest()


def attach_manifest(loadable: Loadable, preset: str, inputs: Sequence[TensorQuant],
                    outputs: Sequence[TensorQuant]) -> Loadable:
    """A copy of ``loadable`` with a manifest blob describing it (an older one replaced).

    The checksums cover every other blob as it is now, so attach the manifest
    last, after every blob is final.
    """
    blobs = [b for b in loadable.blobs if b.name != MANIFEST_BLOB]
    manifest = Manifest(preset, tuple(inputs), tuple(outputs),
                        {b.name: blob_sha256(b) for b in blobs})
    blob = Blob(MANIFEST_BLOB, manifest.to_json(), interface=Interface.NONE,
                version=MANIFEST_VERSION)
    return replace(loadable, blobs=[*blobs, blob])


def read_manifest(loadable: Loadable) -> Manifest | None:
    """The loadable's manifest, or None when it has none (NVIDIA's loadables)."""
    found = [b for b in loadable.blobs if b.name == MANIFEST_BLOB]
    if not found:
        return None
    if len(found) > 1:
        raise ManifestError(f"the loadable has {len(found)} blobs named {MANIFEST_BLOB!r}; "
                            f"expected one")
    return Manifest.from_json(found[0].data)


def verify_checksums(loadable: Loadable, manifest: Manifest) -> None:
    """Raise :class:`ChecksumError` naming every blob whose bytes differ from the
    manifest's SHA-256, is missing, or is not covered by the manifest."""
    have = {b.name: b for b in loadable.blobs if b.name != MANIFEST_BLOB}
    problems = []
    for name, digest in manifest.checksums.items():
        if name not in have:
            problems.append((name, "is missing"))
        elif blob_sha256(have[name]) != digest:
            problems.append((name, f"has SHA-256 {blob_sha256(have[name])[:16]}..., the "
                                   f"manifest recorded {digest[:16]}..."))
    problems += [(name, "is not in the manifest (added after compilation)")
                 for name in have if name not in manifest.checksums]
    if problems:
        raise ChecksumError("checksum mismatch: " + "; ".join(f"blob {n!r} {why}"
                                                              for n, why in problems)
                            + " (the loadable was altered after 'opendla compile')",
                            [n for n, _ in problems])
