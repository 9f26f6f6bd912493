"""Run a loadable on int8 NCHW arrays: pack, submit, unpack.

A loadable's bound tensors are feature cubes in NVDLA's channel-packed
layout (atoms of ``cfg.atom_size`` channels; the tensor description's
``strides`` give the line and surface strides in bytes).  A
:class:`LoadableSession` hides that layout: callers give and get plain
int8 ``[N, C, H, W]`` arrays, as the ONNX side of the toolchain does.

>>> raw = open("model_0.nvdla", "rb").read()                     # doctest: +SKIP
>>> sess = LoadableSession(raw, get_preset("nv_small"))         # doctest: +SKIP
>>> sess.inputs[0].shape                                        # doctest: +SKIP
(1, 1, 8, 8)
>>> out = sess.run({"input": x_int8})                           # doctest: +SKIP

Loadables whose inputs come from their own blobs (NVIDIA's regression
loadables bind only outputs) run with no feeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from accel.backends import get_backend
from accel.config import HwConfig
from accel.layout import CubeLayout, pack_feature, unpack_feature
from accel.loadable.io import read_loadable
from accel.loadable.model import (
    DataFormat,
    DataType,
    Loadable,
    MemoryFlags,
    PixelFormat,
    TensorDescListEntry,
)
from accel.runtime.errors import RuntimeUsageError
from accel.runtime.umd import Runtime

#: pixel formats of feature cubes (NVDLA's channel-packed layout)
FEATURE_FORMATS = (PixelFormat.FEATURE, PixelFormat.FEATURE_X8)


def _enum_name(enum: type, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


@dataclass(frozen=True)
class BoundTensor:
    """A loadable input or output as the host sees it: name, NCHW shape, memory layout."""

    name: str
    shape: tuple[int, int, int, int]
    layout: CubeLayout

    @classmethod
    def from_desc(cls, desc: TensorDescListEntry, memory_size: int, cfg: HwConfig,
                  kind: str) -> BoundTensor:
        """Check that ``desc`` is an int8 feature cube this session can pack; the
        error names the tensor and the field that is not supported."""
        what = f"{kind} {desc.name!r}"
        if desc.data_type != DataType.INT8:
            raise RuntimeUsageError(f"{what} has data type "
                                    f"{_enum_name(DataType, desc.data_type)}; only INT8 "
                                    f"tensors can be run from arrays")
        if desc.pixel_format not in FEATURE_FORMATS:
            raise RuntimeUsageError(
                f"{what} has pixel format {_enum_name(PixelFormat, desc.pixel_format)}; only "
                f"feature cubes ({', '.join(f.name for f in FEATURE_FORMATS)}) can be run "
                f"from arrays")
        if desc.data_format not in (DataFormat.NCHW, DataFormat.UNKNOWN):
            raise RuntimeUsageError(f"{what} has data format "
                                    f"{_enum_name(DataFormat, desc.data_format)}; expected NCHW")
        if desc.n != 1:
            raise RuntimeUsageError(f"{what} has batch {desc.n}; loadables run one sample "
                                    f"(n=1) at a time")
        strides = list(desc.strides) + [0, 0, 0]
        layout = CubeLayout(desc.c, desc.h, desc.w, cfg.atom_size, strides[1], strides[2])
        try:
            layout.validate()
        except ValueError as exc:
            raise RuntimeUsageError(f"{what} ({desc.c}x{desc.h}x{desc.w}, line stride "
                                    f"{strides[1]}, surface stride {strides[2]}) does not "
                                    f"fit the {cfg.name} atom of {cfg.atom_size}: "
                                    f"{exc}") from None
        room = min(memory_size - desc.offset, desc.size or memory_size)
        if layout.size > room:
            raise RuntimeUsageError(f"{what} needs {layout.size} bytes in NVDLA layout but its "
                                    f"memory holds {room}")
        return cls(desc.name, (1, desc.c, desc.h, desc.w), layout)


class LoadableSession:
    """A loaded loadable on a backend, run with int8 NCHW arrays (see the module docstring)."""

    def __init__(self, loadable: Loadable | bytes, cfg: HwConfig, backend: str | Any = "cmod",
                 *, trace_regs: bool = False) -> None:
        self.loadable = loadable if isinstance(loadable, Loadable) else read_loadable(loadable)
        self.cfg = cfg
        # a backend name (accel.backends.BACKENDS) or a backend already made
        backend = get_backend(backend, cfg) if isinstance(backend, str) else backend
        self.runtime = Runtime(cfg, backend, trace_regs=trace_regs)
        self.runtime.load(self.loadable)
        self.inputs = self._bound(MemoryFlags.INPUT, "input")
        self.outputs = self._bound(MemoryFlags.OUTPUT, "output")
        if not self.outputs:
            raise RuntimeUsageError("the loadable binds no output tensor: nothing to read back")

    def _bound(self, flag: MemoryFlags, kind: str) -> list[BoundTensor]:
        out = []
        for b in (self.runtime.inputs if flag == MemoryFlags.INPUT else self.runtime.outputs):
            if b.tensor is None:
                raise RuntimeUsageError(f"{kind} memory {b.memory.id} has no tensor "
                                        f"description (tensor_desc_id "
                                        f"{b.memory.tensor_desc_id})")
            out.append(BoundTensor.from_desc(b.tensor, b.memory.size, self.cfg, kind))
        return out

    @property
    def cycles(self) -> int:
        """The cmodel's cycle estimate of the last run (0 on backends without one)."""
        return sum(op.cycles for op in self.runtime.backend.stats)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One inference: ``feeds`` maps every input name to an int8 ``[1, C, H, W]``
        array (``[C, H, W]`` is accepted); returns each output as int8 ``[1, C, H, W]``."""
        names = [t.name for t in self.inputs]
        unknown = sorted(set(feeds) - set(names))
        missing = [n for n in names if n not in feeds]
        if unknown or missing:
            raise RuntimeUsageError(
                f"the loadable's inputs are {', '.join(names) or 'none'}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(unknown)}" if unknown else ""))
        for t in self.inputs:
            x = np.asarray(feeds[t.name])
            if x.ndim == 3:
                x = x[None]
            if x.shape != t.shape:
                raise RuntimeUsageError(f"input {t.name!r} has shape {x.shape}; the loadable "
                                        f"takes {t.shape}")
            if x.dtype != np.int8:
                raise RuntimeUsageError(f"input {t.name!r} has dtype {x.dtype}; loadables "
                                        f"take int8 arrays (quantize with the input's scale)")
            self.runtime.bind_input(t.name, pack_feature(x[0], t.layout).tobytes())
        self.runtime.submit()
        return {t.name: unpack_feature(self.runtime.read_output(t.name), t.layout)
                .astype(np.int8, copy=False)[None] for t in self.outputs}
