"""The pipelines an op enable starts, as :class:`accel.cmod.dla.Dla` decides them.

A pipeline is the set of units whose consumer register groups one operation runs
from: a convolution (CDMA, CSC, CMAC_A/B, CACC and the SDP consuming it on the
fly), an SDP reading memory, a PDP reading memory, and a PDP fed on the fly by
the SDP.  :class:`Launch` is one such start decided from the registers;
:class:`ConvDone` what a convolution's datapath produced before its completion.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.cmod.records import OpRecord

CONV_UNITS = ("NVDLA_CDMA", "NVDLA_CSC", "NVDLA_CMAC_A", "NVDLA_CMAC_B", "NVDLA_CACC")


def sdp_units(needs_rdma: bool) -> tuple[str, ...]:
    """The SDP's units: with SDP_RDMA when the SDP takes data from memory."""
    return ("NVDLA_SDP", "NVDLA_SDP_RDMA") if needs_rdma else ("NVDLA_SDP",)


@dataclass(frozen=True)
class Launch:
    """A pipeline start decided from the registers: what :meth:`accel.cmod.dla.Dla.launch`
    runs.

    ``kind`` is "conv" (a convolution and the SDP on the fly), "sdp" (an SDP
    reading memory), "pdp" (a PDP reading memory) or "cdp" (a CDP operation, which
    also reads its LUT's registers as it runs); ``plan`` is the op decoded from the
    registers; ``pdp_plan`` is a PDP fed on the fly by the SDP.
    """

    kind: str
    plan: object
    needs_rdma: bool = False
    pdp_plan: object = None

    def units(self) -> tuple[str, ...]:
        """The units whose consumer register groups this launch runs from."""
        if self.kind == "pdp":
            return ("NVDLA_PDP", "NVDLA_PDP_RDMA")
        if self.kind == "cdp":
            return ("NVDLA_CDP", "NVDLA_CDP_RDMA")
        units = sdp_units(self.needs_rdma)
        if self.kind == "conv":
            units = CONV_UNITS + units
        if self.pdp_plan is not None:
            units += ("NVDLA_PDP", "NVDLA_PDP_RDMA")
        return units


@dataclass
class ConvDone:
    """What a convolution's datapath produced; the rest of the op (saturation registers,
    CBUF state, its record, completion) is bookkeeping in
    :meth:`accel.cmod.dla.Dla._run_conv`."""

    cacc_sat: int
    sdp: OpRecord                    # the SDP's record
    sdp_sat: int
    streamed: np.ndarray | None      # the output streamed to PDP
    raw: np.ndarray | None           # packed weight bytes (kept by SKIP_WEIGHT_RLS)
    data: object                     # the input as the CBUF holds it (kept by SKIP_DATA_RLS)
    in_shape: tuple
    in_bytes: int
    data_reused: bool
    weights_reused: bool
    note: str = ""
