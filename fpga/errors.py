"""The one base of every error the FPGA side (board link, protocol) raises."""

from __future__ import annotations


class FpgaError(Exception):
    """Base of every error raised by the ``fpga`` package."""
