"""Write register traces in NVIDIA's ``.cfg`` + ``.dat`` format (the one :mod:`accel.trace.script`
plays).

A trace directory ``<dir>/<name>/`` holds ``<name>.cfg`` - ``mem_init`` /
``mem_load`` of each memory region, ``reg_write`` of each register,
``intr_notify`` waits and ``check_crc`` goldens - and one ``.dat`` packet file
per loaded region
(``{offset:0x0, size:N, payload:0x.. 0x.. ...} ,``, offsets relative to the
region's base).  :mod:`accel.backends.rtl` writes one for every convolution it
runs on the RTL engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: payload bytes per ``.dat`` packet
PACKET = 32


def format_dat(data: bytes | np.ndarray) -> str:
    """``data`` as a ``.dat`` packet file, offsets from 0."""
    raw = bytes(np.asarray(data, dtype=np.uint8).tobytes()) if isinstance(data, np.ndarray) \
        else bytes(data)
    lines = ["{"]
    for off in range(0, len(raw), PACKET):
        chunk = raw[off:off + PACKET]
        payload = " ".join(f"0x{b:02x}" for b in chunk)
        lines.append(f"{{offset:{off:#x}, size:{len(chunk)}, payload:{payload}}} ,")
    lines.append("}")
    return "\n".join(lines) + "\n"


@dataclass
class TraceBuilder:
    """Statements of one trace, written by :meth:`write`."""

    name: str
    lines: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    def comment(self, text: str) -> None:
        self.lines.append(f"// {text}")

    def load(self, base: int, data: bytes | np.ndarray, label: str) -> None:
        """A memory region: mapped (zero) and loaded with ``data``."""
        raw = bytes(np.asarray(data, dtype=np.uint8).tobytes()) if isinstance(data, np.ndarray) \
            else bytes(data)
        file = f"{self.name}_{label}.dat"
        if file in self.files:
            raise ValueError(f"region label {label!r} used twice")
        self.files[file] = raw
        self.lines += [f"mem_init(pri_mem, {base:#x}, {len(raw):#x}, ALL_ZERO);",
                       f'mem_load(pri_mem, {base:#x}, "{file}");']

    def write(self, symbol: str, value: int) -> None:
        self.lines.append(f"reg_write({symbol}, {value & 0xFFFFFFFF:#x});")

    def notify(self, source: str, sync_id: str) -> None:
        self.lines.append(f"intr_notify({source}, {sync_id});")

    def check_crc(self, sync_id: str, base: int, size: int, crc: int) -> None:
        """After ``sync_id`` was notified, the CRC-32 (``zlib.crc32``) of ``size`` bytes at
        ``base`` must be ``crc``."""
        self.lines.append(f"check_crc({sync_id}, 1, {base:#x}, {size:#x}, {crc:#010x});")

    def save(self, directory: Path) -> Path:
        """Write ``<directory>/<name>/``; returns that trace directory."""
        out = Path(directory) / self.name
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.name}.cfg").write_text("\n".join(self.lines) + "\n")
        for file, raw in self.files.items():
            (out / file).write_text(format_dat(raw))
        return out
