"""Errors raised by the register-level model."""

from __future__ import annotations

from accel.errors import AccelError, AccelInputError


class UnsupportedError(AccelError):
    """The programmed operation needs hardware this model (or this config) does not have.

    The trace player reports it as *skip* with this message, never as pass.
    """


class ConfigError(AccelInputError, ValueError):
    """Invalid register programming; the message names unit, register and value."""

    def __init__(self, unit: str, register: str, value: int, why: str) -> None:
        super().__init__(f"{unit}.{register} = {value:#x}: {why}")
        self.unit, self.register, self.value = unit, register, value


# Largest array (elements) one operation may materialise: 2**25 int64 = 256 MiB.
# Register fields allow 8192 x 8192 x 8192 cubes; with zero strides such a cube
# even fits a small memory region, so the size is checked before allocating.
MAX_ELEMENTS = 1 << 25
# Largest weight fetch (bytes) of one operation: the same 256 MiB. Weights are int8 and
# a fully-connected layer's are one fetch (AlexNet's 9216 -> 4096: 37.7 MB, VGG's
# 25088 -> 4096: 103 MB).
MAX_WEIGHT_BYTES = 1 << 28


class ModelLimitError(UnsupportedError):
    """The programmed operation is legal but larger than this model computes."""


def check_elements(unit: str, what: str, n: int, limit: int = MAX_ELEMENTS) -> None:
    """Raise :class:`ModelLimitError` when ``n`` elements exceed ``limit``."""
    if n > limit:
        raise ModelLimitError(f"{unit}: {what} has {n} elements, more than the model's limit "
                              f"of {limit}")
