"""CMAC: the int8 multiply-accumulate array (CMAC_A + CMAC_B).

One *atom* operation takes ATOMIC_C int8 feature values and ATOMIC_K kernels of
ATOMIC_C int8 weights and produces ATOMIC_K partial sums, each the exact sum of
ATOMIC_C int8 x int8 products (NVDLA_MAC_RESULT_WIDTH = 16 + log2(ATOMIC_C)
bits, so it never overflows).  Lanes whose data or weight mask is 0 contribute
nothing (cmod ``calculation_int8``); a kernel beyond the layer's K outputs 0.

:func:`mac_atoms` is the scoreboard function of the RTL tests; the plain model
computes a whole convolution's sums as one exact GEMM (:func:`conv_gemm`)
rather than atom by atom, the same integers in another order.  The fast forms of
that GEMM are in :mod:`accel.cmod.fast.gemm`.
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


def conv_gemm(weights: np.ndarray, patches: np.ndarray) -> np.ndarray:
    """Exact sums of products ``weights[K, CRS] @ patches[CRS, N]`` as int64.

    A whole convolution as one GEMM: float64 BLAS is exact while every partial
    sum stays below 2**53; int8 x int8 products are below 2**14, so this holds
    for reductions shorter than 2**39 terms.  Longer ones fall back to int64.
    """
    if weights.shape[1] < (1 << 39):
        return np.rint(weights.astype(np.float64) @ patches.astype(np.float64)).astype(np.int64)
    return weights.astype(np.int64) @ patches.astype(np.int64)
