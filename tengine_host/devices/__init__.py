"""Execution devices: a small protocol and a named dict of factories.

>>> get_device("cpu").name
'cpu'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from tengine_host.devices.base import Device
from tengine_host.devices.cpu import CpuDevice


def _nvdla(**options: Any) -> Device:
    # Imported on demand: the accelerator stack (accel.*) loads only when asked for.
    try:
        module = importlib.import_module("tengine_host.devices.nvdla")
    except ModuleNotFoundError as exc:
        raise ValueError(f"device 'nvdla' is not available: {exc}") from exc
    return module.NvdlaDevice(**options)


#: Device name -> factory taking keyword options.
DEVICES: dict[str, Callable[..., Device]] = {
    "cpu": CpuDevice,
    "nvdla": _nvdla,
}


def get_device(name: str, **options: Any) -> Device:
    """Instantiate device ``name``; the error lists the known names."""
    try:
        factory = DEVICES[name]
    except KeyError:
        raise ValueError(f"device {name!r} not in {', '.join(DEVICES)}") from None
    return factory(**options)


__all__ = ["DEVICES", "CpuDevice", "Device", "get_device"]
