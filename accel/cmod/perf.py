"""Cycle estimates of the register-level model: a throughput (roofline) model per op.

The model is not cycle-accurate.  Each operation is bounded by its slowest
resource, assuming the units of a fused pipeline overlap completely:

* **DMA**: bytes moved / ``primary_memif_width / 8`` bytes per cycle (one
  beat per cycle, latency hidden by outstanding requests).  Feature cubes
  count whole atoms (padded channels included), as the DMAs move them.
* **Convolution** (CDMA -> CSC -> CMAC -> CACC): one *MAC atom* per cycle, an
  atom being ``ATOMIC_C`` input channels x ``ATOMIC_K`` kernels of one output
  pixel and kernel tap: ``out_h * out_w * R * S * ceil(C / ATOMIC_C) *
  ceil(K / ATOMIC_K)``.  The CSC walks *rounds* (kernel group, stripe of
  output points, channel group, tap): the op's output points cut into equal
  stripes of at most :data:`STRIPE_POINTS`, a round sends its stripe's atoms,
  and loads the next round's kernels into the CMAC's shadow weights meanwhile,
  one CBUF entry (one kernel's ``ATOMIC_C`` weights) per cycle: a round lasts
  ``max(stripe points, kernels of its group)`` cycles.  Bounded below by the
  fused SDP, by what the CDMA fetches (the input and ``WEIGHT_BYTES`` of
  weights, nothing for an input or weights reused from the CBUF,
  ``DATA_REUSE`` / ``WEIGHT_REUSE``), and by the order of the kernel groups:
  the first one ends no sooner than the whole input and its own weights are
  in, and the rounds of the others follow.  With SDP on the fly, the last
  stripe's sums leave the CACC only after the MAC array's last atom: SDP's
  time for one stripe follows the rounds.
* **SDP**: ``c_pad * h * w`` elements at the throughput of the slowest
  active stage (``SDP_BS/BN/EW_THROUGHPUT``; the BS throughput when all are
  bypassed); from memory also bounded by the input + operand + output DMA.
* **PDP**: one pass over the input cube at ``PDP_THROUGHPUT`` elements per
  cycle (the line buffer reuses rows, so the kernel size does not multiply),
  bounded by its input + output DMA.
* **CDP**: ``c_pad * h * w`` elements at ``CDP_THROUGHPUT`` per cycle, bounded
  by input + output DMA.
* **BDMA** and **RUBIK**: pure data movement, so DMA-bound: the bytes read plus
  the bytes written (whole 32-byte atoms, padding included) over the memory
  interface; Rubik's reordering buffer is assumed to keep up.

What it does not count: DMA latency and bank conflicts, stalls of weights
streaming through fewer banks than they need (the input always fits: the
model refuses an op whose input does not), CSB programming time, pipeline
fill/drain (but for the fused SDP's last stripe), and interrupts: an op of a
few atoms takes its pipeline's latency (tens of cycles), not its estimate.
"""

from __future__ import annotations

from accel.config import HwConfig

#: output points of a convolution stripe (CSC sends a stripe of atoms per kernel tap; the
#: CACC delivers a stripe's sums together): NVDLA's CSC cuts at 16 to 32 atoms
STRIPE_POINTS = 16


def ceil_div(a: int, b: int) -> int:
    return -(-a // max(1, b))


def dma_cycles(cfg: HwConfig, nbytes: int) -> int:
    """Cycles to move ``nbytes`` over the primary memory interface."""
    return ceil_div(nbytes, cfg.dma_bytes_per_cycle)


def conv_cycles(cfg: HwConfig, out_hw: tuple[int, int], kernel: tuple[int, int, int, int],
                data_bytes: int, weight_bytes: int, sdp: int = 0) -> tuple[int, int]:
    """``(cycles, mac_atoms)`` of a direct convolution; ``kernel`` is (K, C, R, S).

    ``data_bytes`` / ``weight_bytes`` are what the CDMA fetches from memory:
    0 for an input / weights the CBUF kept from the previous convolution.
    """
    k, c, r, s = kernel
    points, kgs = out_hw[0] * out_hw[1], ceil_div(k, cfg.atomic_k)
    cgs = ceil_div(c, cfg.atomic_c)
    atoms = points * r * s * cgs * kgs
    stripes = ceil_div(points, STRIPE_POINTS)
    last_stripe = ceil_div(sdp, kgs * stripes) if sdp else 0
    # equal stripes: `longer` of them one point longer than the others
    short, longer = divmod(points, stripes)

    def group(kernels: int) -> int:
        """Cycles of one kernel group's rounds."""
        return r * s * cgs * (longer * max(short + 1, kernels)
                              + (stripes - longer) * max(short, kernels))

    first = group(min(k, cfg.atomic_k))
    rounds = first + (kgs - 2) * group(cfg.atomic_k) + group(k - (kgs - 1) * cfg.atomic_k) \
        if kgs > 1 else first
    first_weights = ceil_div(weight_bytes * min(k, cfg.atomic_k), k)
    in_order = dma_cycles(cfg, data_bytes + first_weights) + rounds - first
    return max(rounds + last_stripe, dma_cycles(cfg, data_bytes + weight_bytes), sdp,
               in_order + last_stripe), atoms


def sdp_cycles(g, cfg: HwConfig, c_pad: int, h: int, w: int, from_memory: bool) -> int:
    """SDP op on a ``c_pad x h x w`` cube; ``g`` is its SDP register group view."""
    rates = []
    if not g("D_DP_BS_CFG", "BS_BYPASS"):
        rates.append(cfg.sdp_bs_throughput)
    if not g("D_DP_BN_CFG", "BN_BYPASS"):
        rates.append(cfg.sdp_bn_throughput)
    if not g("D_DP_EW_CFG", "EW_BYPASS"):
        # a Y stage modelled on a config without one (trace goldens): 1 per cycle
        rates.append(cfg.sdp_ew_throughput or 1)
    rate = min(rates) if rates else cfg.sdp_bs_throughput
    elems = c_pad * h * w
    compute = ceil_div(elems, rate)
    if not from_memory:
        return compute
    # input cube and output cube; operand cubes are at most another input each
    return max(compute, dma_cycles(cfg, 2 * elems))


def pdp_cycles(cfg: HwConfig, in_elems: int, out_elems: int, from_memory: bool) -> int:
    compute = ceil_div(in_elems, cfg.pdp_throughput)
    dma = dma_cycles(cfg, (in_elems if from_memory else 0) + out_elems)
    return max(compute, dma)


def cdp_cycles(cfg: HwConfig, elems: int) -> int:
    return max(ceil_div(elems, cfg.cdp_throughput), dma_cycles(cfg, 2 * elems))


def rubik_cycles(cfg: HwConfig, read_bytes: int, write_bytes: int) -> int:
    """A Rubik op: its input and output DMA traffic over the memory interface."""
    return dma_cycles(cfg, read_bytes + write_bytes)
