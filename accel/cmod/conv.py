"""A direct convolution decoded once: CDMA -> CSC -> CMAC -> CACC, and the SDP on the fly.

:func:`decode` reads and checks the consumer register groups of the
convolution units (and the SDP behind them) and keeps what the datapath needs
as plain values: the input cube's address and strides, the weight address and
the order that unpacks the packed bytes, the geometry, the CBUF use, the CACC
truncate, the SDP's :class:`~accel.cmod.sdp.SdpPlan`.  The Dla runs a decoded
plan again for every operation whose registers are the same, so a loadable's
second inference does no register decoding at all.

The arithmetic (NVDLA_FACTS section 3) is unchanged by the split:
``psum = sum(x * w)`` exact, saturated to 34 bits, ``clip_truncate`` to int32
with round half away from zero; :func:`accel.cmod.cmac.conv_gemm` computes the
sums exactly (and so do the speed layer's engines, :mod:`accel.cmod.fast.gemm`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.cmod import cacc, cbuf_state, cdma, csc, sdp
from accel.cmod.csb import GroupView
from accel.cmod.errors import ConfigError
from accel.config import HwConfig


@dataclass(frozen=True)
class ConvPlan:
    """See the module docstring.  ``feature`` is ``(base, c, h, w, line, surf)`` of a
    feature-cube input (None for image input, which the CDMA fetches from its group);
    ``feature_cvt`` the input converter applied to it (:func:`accel.cmod.cdma.feature_converter`,
    None when off)."""

    geo: csc.ConvGeometry
    use: cbuf_state.ConvBuffers
    feature: tuple[int, int, int, int, int, int] | None
    weight_addr: int
    weight_size: int
    truncate: int
    sdp: sdp.SdpPlan
    feature_cvt: tuple[int, int, int] | None = None

    @property
    def kernel(self) -> tuple[int, int, int, int]:
        g = self.geo
        return g.k, g.c, g.r, g.s

    def weight_order(self, cfg: HwConfig) -> np.ndarray:
        """int64 ``[K, C*R*S]``: the byte of each weight in im2col order.  Computed when a
        weight matrix is built, not kept: it is 8 bytes per weight."""
        g = self.geo
        return cdma.weight_offsets(g.k, g.c, g.r, g.s, cfg.atomic_k, cfg.atomic_c).reshape(g.k, -1)


def decode(cfg: HwConfig, g_cdma: GroupView, g_csc: GroupView, g_cacc: GroupView,
           g_sdp: GroupView, rdma: GroupView | None, model_y: bool = False) -> ConvPlan:
    """Read and check a convolution's registers; raise what the hardware would refuse."""
    cdma.check_supported(g_cdma)
    sdp.check_supported(g_sdp, cfg, model_y)
    geo = csc.geometry(g_csc)
    if geo.image != bool(g_cdma("D_DATAIN_FORMAT", "DATAIN_FORMAT")):
        raise ConfigError("CSC", "D_DATAIN_FORMAT", int(geo.image),
                          "CSC and CDMA disagree on feature/pixel input")
    use = cbuf_state.check(cfg, g_cdma, g_csc)
    cdma.check_kernels(g_cdma, geo.k, geo.c, geo.r, geo.s)
    feature = feature_cvt = None
    if not geo.image:
        feature, feature_cvt = cdma.feature_source(g_cdma, cfg), cdma.feature_converter(g_cdma)
        if feature[1] != geo.c:
            raise ConfigError("CSC", "D_WEIGHT_SIZE_EXT_1", geo.c - 1,
                              f"kernel channels {geo.c} != CDMA input channels {feature[1]}")
    truncate = g_cacc("D_CLIP_CFG", "CLIP_TRUNCATE")
    if truncate > cacc.MAX_TRUNCATE:
        raise ConfigError("CACC", "D_CLIP_CFG", truncate,
                          f"CLIP_TRUNCATE must be 0..{cacc.MAX_TRUNCATE}")
    plan_sdp = sdp.decode(g_sdp, rdma, cfg, flying=True, model_y=model_y)
    c_pad = plan_sdp.c_pad
    if (plan_sdp.h, plan_sdp.w) != (geo.out_h, geo.out_w) or geo.k > c_pad:
        raise ConfigError("SDP", "D_DATA_CUBE_CHANNEL", plan_sdp.c - 1,
                          f"SDP cube {plan_sdp.c}x{plan_sdp.h}x{plan_sdp.w} (CxHxW) does not "
                          f"match the CACC output {geo.k}x{geo.out_h}x{geo.out_w}")
    return ConvPlan(geo=geo, use=use, feature=feature,
                    weight_addr=g_cdma.addr("D_WEIGHT_ADDR_LOW", "D_WEIGHT_ADDR_HIGH"),
                    weight_size=use.kernels * use.bytes_per_kernel,
                    truncate=truncate, sdp=plan_sdp, feature_cvt=feature_cvt)
