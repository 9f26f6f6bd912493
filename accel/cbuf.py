"""Buffer arithmetic of the convolution pipeline (CBUF) and of the PDP line buffer.

One place for the sizes that decide whether an operation fits the hardware;
the compiler plans with them and the cmodel checks programmed registers
against them.  The rules are NVIDIA's (nvdla/sw ``ConvCoreNode.cpp``
``calculateEPS`` / ``calculate*BanksFor*``, ``PDPNode.cpp``
``calculateMaxWidth``); the NVDLA traces program exactly these values.

CBUF
----
The CBUF has ``cbuf_bank_number`` banks of ``cbuf_bank_depth`` entries of
``cbuf_bank_width`` bytes.  A direct convolution gives ``DATA_BANK`` banks to
its input and ``WEIGHT_BANK`` banks to its weights (together at most the bank
count).

* One input row (a *slice*) occupies ``entries_per_slice`` entries: a whole
  entry per pixel for each full entry's worth of channel atoms, and for a
  remainder of atoms that fills only part of an entry, that fraction of the
  row's width (two pixels share an entry when the remainder is half of one).
  On nv_small (8-byte atoms and entries) this is ``W * ceil(C / 8)``.
* The whole input of the operation must be resident:
  ``entries_per_slice * H <= DATA_BANK * depth``.
* Weights stream through their banks one kernel group (``ATOMIC_K`` kernels)
  at a time, so the banks must hold at least one group; when they hold all of
  the weights, the weights can stay for the next operation (weight reuse).
* ``WEIGHT_BYTES`` is the packed weight size ``K * BYTE_PER_KERNEL`` padded to
  :data:`WEIGHT_PAD` bytes (format.rst; the traces pad 8610 bytes to 8704).

>>> from accel.config import get_preset
>>> small, large = get_preset("nv_small"), get_preset("nv_large")
>>> entries_per_slice(small, channels=14, width=24), entries_per_slice(large, 32, 8)
(48, 4)
>>> data_banks(small, channels=76, width=32, height=26)
17
>>> weight_bytes(kernels=41, bytes_per_kernel=14 * 5 * 3)
8704

PDP
---
Pooling keeps the lines a vertical window still needs in a 7 KiB buffer:
``overlap`` lines of ``ATOMIC_K`` 14-bit int8 elements per output column, so
the output of one pass (or of one split-width slice) is at most
:func:`pdp_max_width` columns wide.

>>> pdp_max_width(small, kernel_h=2, stride_y=2), pdp_max_width(small, 3, 1)
(512, 128)
"""

from __future__ import annotations

from accel.config import HwConfig

WEIGHT_PAD = 128                 # WEIGHT_BYTES is padded to whole 128-byte blocks
PDP_BUFFER_BYTES = 7 * 1024      # PDP line buffer
PDP_BITS_PER_ELEMENT = 14        # int8 element width in the PDP buffer
# lines the PDP buffer keeps per logical overlap ceil(kernel_h / stride_y), 0..8
PDP_OVERLAP_LINES = (1, 1, 2, 4, 4, 8, 8, 8, 8)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def entries_per_slice(cfg: HwConfig, channels: int, width: int, elem_bytes: int = 1) -> int:
    """CBUF entries one input row of a feature cube occupies (``D_ENTRY_PER_SLICE + 1``)."""
    if channels < 1 or width < 1:
        raise ValueError(f"cube {channels} channels x {width} wide must be non-empty")
    atoms_per_entry = max(1, cfg.cbuf_entry_bytes // cfg.atom_size)
    atoms = _ceil_div(channels * elem_bytes, cfg.atom_size)
    full, rest = divmod(atoms, atoms_per_entry)
    # three atoms of four fill the entry; fewer share it between pixels
    tail = width if rest == 3 else _ceil_div(rest * width, atoms_per_entry)
    return full * width + tail


def image_entries_per_slice(cfg: HwConfig, channels: int, width_ext: int,
                            elem_bytes: int = 1) -> int:
    """CBUF entries of one padded image line (pixel input: ``W_ext * channels`` bytes)."""
    return _ceil_div(width_ext * channels * elem_bytes, cfg.cbuf_entry_bytes)


def data_banks(cfg: HwConfig, channels: int, width: int, height: int) -> int:
    """Banks that hold a whole ``channels x height x width`` int8 input."""
    return _ceil_div(entries_per_slice(cfg, channels, width) * height, cfg.cbuf_bank_depth)


def weight_bytes(kernels: int, bytes_per_kernel: int) -> int:
    """``WEIGHT_BYTES`` of ``kernels`` packed kernels (padded to :data:`WEIGHT_PAD`)."""
    return _ceil_div(kernels * bytes_per_kernel, WEIGHT_PAD) * WEIGHT_PAD


def _banks_for(cfg: HwConfig, nbytes: int) -> int:
    return _ceil_div(_ceil_div(nbytes, cfg.cbuf_entry_bytes), cfg.cbuf_bank_depth)


def weight_banks_total(cfg: HwConfig, kernels: int, bytes_per_kernel: int) -> int:
    """Banks that hold every kernel (weights resident for the whole operation)."""
    return _banks_for(cfg, kernels * bytes_per_kernel)


def weight_banks_min(cfg: HwConfig, kernels: int, bytes_per_kernel: int) -> int:
    """Banks that hold one kernel group: the least the weights can stream through."""
    return _banks_for(cfg, min(kernels, cfg.atomic_k) * bytes_per_kernel)


def pdp_max_width(cfg: HwConfig, kernel_h: int, stride_y: int) -> int:
    """Widest output one PDP pass (or split-width slice) produces from its line buffer."""
    if not (1 <= kernel_h <= 8 and stride_y >= 1):
        raise ValueError(f"pooling kernel height {kernel_h} (1..8) / stride {stride_y} (>= 1)")
    overlap = PDP_OVERLAP_LINES[min(_ceil_div(kernel_h, stride_y), 8)]
    return PDP_BUFFER_BYTES * 8 // (overlap * cfg.atomic_k * PDP_BITS_PER_ELEMENT)
