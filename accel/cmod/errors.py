"""Errors raised by the register-level model."""

from __future__ import annotations


class UnsupportedError(Exception):
    """The programmed operation needs hardware this model (or this config) does not have.

    The trace player reports it as *skip* with this message, never as pass.
    """


class ConfigError(ValueError):
    """Invalid register programming; the message names unit, register and value."""

    def __init__(self, unit: str, register: str, value: int, why: str) -> None:
        super().__init__(f"{unit}.{register} = {value:#x}: {why}")
        self.unit, self.register, self.value = unit, register, value
