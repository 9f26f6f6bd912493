"""CMAC: the int8 multiply-accumulate array (CMAC_A + CMAC_B).

One *atom* operation takes ATOMIC_C int8 feature values and ATOMIC_K kernels of
ATOMIC_C int8 weights and produces ATOMIC_K partial sums, each the exact sum of
ATOMIC_C int8 x int8 products (NVDLA_MAC_RESULT_WIDTH = 16 + log2(ATOMIC_C)
bits, so it never overflows).  Lanes whose data or weight mask is 0 contribute
nothing (cmod ``calculation_int8``); a kernel beyond the layer's K outputs 0.

:func:`mac_atoms` is the scoreboard function of the RTL tests and the inner
product used by the convolution path (which computes a whole convolution as
one GEMM rather than atom by atom).
"""

from __future__ import annotations

import numpy as np


def mac_atoms(data: np.ndarray, weights: np.ndarray,
              data_mask: np.ndarray | None = None,
              weight_mask: np.ndarray | None = None) -> np.ndarray:
    """Sums of products for a batch of atoms.

    Parameters
    ----------
    data : int array [N, C]
        N feature atoms of C = ATOMIC_C int8 values.
    weights : int array [K, C]
        K = ATOMIC_K kernels of C int8 weights.
    data_mask, weight_mask : bool arrays [N, C] / [K, C], optional
        False lanes are skipped (treated as zero products).

    Returns
    -------
    int64 array [N, K]
    """
    d = np.asarray(data, dtype=np.int64)
    w = np.asarray(weights, dtype=np.int64)
    if d.ndim != 2 or w.ndim != 2 or d.shape[1] != w.shape[1]:
        raise ValueError(f"mac_atoms: data {d.shape} and weights {w.shape} "
                         f"must be [N, C] and [K, C]")
    if data_mask is not None:
        d = np.where(data_mask, d, 0)
    if weight_mask is not None:
        w = np.where(weight_mask, w, 0)
    return d @ w.T


#: int8 x int8 products are at most 2**14 in magnitude ((-128) * (-128)), so any partial sum
#: of 1024 of them stays within 2**24, where float32 holds every integer exactly
EXACT_F32_TERMS = 1 << 10


def gemm_sums(weights: np.ndarray, patches: np.ndarray) -> np.ndarray:
    """Exact ``weights[..., K, R] @ patches[..., R, N]`` of int8 values (any dtype holding
    them); leading dimensions broadcast as in :func:`numpy.matmul` (a batch of
    convolutions).  float32 when ``R`` <= :data:`EXACT_F32_TERMS` (every value an exact
    integer), else int64.

    float32 GEMMs over chunks of :data:`EXACT_F32_TERMS` reduction terms: every
    partial sum of a chunk, in whatever order BLAS adds, is an integer of at most
    2**24 and so exact in float32; the chunk results are summed in int64.
    """
    w = weights if weights.dtype == np.float32 else weights.astype(np.float32)
    p = patches if patches.dtype == np.float32 else patches.astype(np.float32)
    r = w.shape[-1]
    if r <= EXACT_F32_TERMS:
        return w @ p
    out = None
    for r0 in range(0, r, EXACT_F32_TERMS):
        part = (w[..., r0:r0 + EXACT_F32_TERMS] @ p[..., r0:r0 + EXACT_F32_TERMS, :]
                ).astype(np.int64)
        out = part if out is None else np.add(out, part, out=out)
    return out


def gemm_int8(weights: np.ndarray, patches: np.ndarray) -> np.ndarray:
    """:func:`gemm_sums` as int64."""
    sums = gemm_sums(weights, patches)
    return sums if sums.dtype == np.int64 else sums.astype(np.int64)


def conv_gemm(weights: np.ndarray, patches: np.ndarray) -> np.ndarray:
    """Exact sums of products ``weights[K, CRS] @ patches[CRS, N]`` as int64.

    A whole convolution as one GEMM: float64 BLAS is exact while every partial
    sum stays below 2**53; int8 x int8 products are below 2**14, so this holds
    for reductions shorter than 2**39 terms.  Longer ones fall back to int64.
    """
    if weights.shape[1] < (1 << 39):
        return np.rint(weights.astype(np.float64) @ patches.astype(np.float64)).astype(np.int64)
    return weights.astype(np.int64) @ patches.astype(np.int64)
