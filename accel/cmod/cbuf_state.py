"""CBUF: the convolution buffer's limits, and what it keeps from one convolution to the next.

The CBUF has ``cfg.cbuf_bank_number`` banks of ``cfg.cbuf_bank_depth`` entries
of ``cfg.cbuf_entry_bytes``.  A direct convolution (feature or image input)
gives its input the first ``DATA_BANK + 1`` banks and its weights the next
``WEIGHT_BANK + 1`` (CDMA and CSC ``D_BANK``).  The sizes are
:mod:`accel.cbuf` (NVIDIA's compiler rules; the NVDLA traces program exactly
those values).  :func:`check` refuses programming the hardware cannot run,
before any data moves:

* ``D_BANK``: the two bank counts add up to at most the preset's banks.
* ``D_ENTRY_PER_SLICE``: ``ENTRIES + 1`` is the entries of one input row,
  :func:`accel.cbuf.entries_per_slice` of the CDMA cube's C and W.  The NVDLA
  cmod FAILs on any other value (``NV_NVDLA_cdma.cpp``
  ``DirectConvDataResponseSequencerCommon`` "invalid configuration
  cdma_entries_", the CSC the same).  For image input the cmod lays CBUF lines
  ``ENTRIES + 1`` entries apart without checking (a smaller value overlaps
  lines); the rule is NVIDIA's compiler's (``calculateEPS``:
  ``ceil(W_ext * C / entry)``, :func:`accel.cbuf.image_entries_per_slice`
  with ``W_ext = PAD_LEFT + W + PAD_RIGHT``), which the img_* traces program
  (51 four-channel pixels: 26 entries on nv_small, 7 on nv_medium_512, 4 on
  nv_large).  For 10/12/16-bit pixels (nv_full) the compiler counts two bytes
  per element while the CBUF receives converted int8 elements; no trace
  shows which the hardware needs, so either value passes.
* the whole input is resident: ``(ENTRIES + 1) * (DATAIN_HEIGHT + 1) <=
  (DATA_BANK + 1) * depth`` (cmod "insufficient cbuf space", RTL assertion
  "data bank is not big enough").
* ``D_WEIGHT_BYTES``: between ``K * BYTE_PER_KERNEL`` and that padded to
  :data:`accel.cbuf.WEIGHT_PAD` bytes, and whole CBUF entries (the cmod
  counts the entries it fetched: "The total size of weight should be multiple
  of NVDLA_CBUF_BANK_WIDTH").
* ``WEIGHT_BANK + 1 >= weight_banks_min``: weights stream through their banks
  one kernel group (``ATOMIC_K`` kernels) at a time - the CSC releases a group
  when it is done with it - so the banks must hold one group (RTL assertion
  "Run out of weight buffer: uncompressed weight!"); NVIDIA's dc_32x26x76_6x3x76x270 streams 360 KiB
  of weights through 6 banks.
* CDMA and CSC program the same ``D_BANK``, ``D_ENTRY_PER_SLICE``,
  ``D_WEIGHT_BYTES`` and ``D_MISC_CFG`` reuse/release bits.

What the CBUF keeps (:class:`Cbuf`), from NVIDIA's cmod (``NV_NVDLA_cdma.cpp``
``WeightReadRequestSequenceThread`` / ``ActDataReadRequestSequenceThread``,
``NV_NVDLA_csc.cpp`` ``WeightLoadSequenceThread`` / ``DataLoadSequenceThread``)
and RTL (``NV_NVDLA_CDMA_wt.v`` / ``_dc.v`` / ``_IMG_ctrl.v`` fetch FSMs,
``NV_NVDLA_CSC_sg.v``):

* Only the previous convolution counts: its ``SKIP_WEIGHT_RLS`` keeps its
  weights, ``SKIP_DATA_RLS`` its input; the next convolution that does not
  reuse them releases them.  SDP, PDP and CDP operations do not touch the CBUF.
* ``SKIP_WEIGHT_RLS`` needs every weight resident (``WEIGHT_BANK + 1 >=
  weight_banks_total``): the CSC releases no kernel group of such an op, so
  weights that must stream would never get their banks back (cmod FAIL "The
  total weight size is larger than cdma_weight_bank_..., but
  cdma_skip_weight_rls_ is true", RTL assertion "Run out of weight buffer:
  full weight!").  Streamed weights are therefore refused when kept, and so
  can never be reused.
* ``WEIGHT_REUSE`` skips the weight fetch and computes with the kept weights
  (the bytes in the CBUF, whatever memory now holds).  Refused
  (:class:`ConfigError` naming ``D_MISC_CFG``): nothing kept (cmod FAIL
  "current layer is weight_reuse, previous layer shall be full input"), a
  different ``WEIGHT_BANK`` (cmod: "weight bank settings shall be the same as
  previous layer"), or weights of another shape (``WEIGHT_BYTES``, kernels,
  bytes per kernel, feature/image input: the model cannot say what the CSC
  makes of other bytes).  A changed ``DATA_BANK`` moves the weight banks: the
  hardware then clears the CBUF and fetches the weights again (RTL
  ``need_pending``, cmod "BANK changed. Not reuse weight"), and so does the
  model, with a note.
* ``DATA_REUSE`` skips the input fetch and convolves the kept input.  Refused:
  nothing kept, a different ``DATA_BANK`` or entries, W, H, C or input kind.
  The hardware would fetch from memory instead (the RTL only skips the fetch
  when the previous op kept its data in the same banks), so a program that
  sets the bit without kept data is inconsistent; the cmod additionally
  requires an unchanged ``WEIGHT_BANK``, the RTL does not, and neither does
  this model.  Partial reuse (the previous op released only ``RLS_SLICES +
  1`` of its rows, CSC ``D_RELEASE``, and this op reads the rest) is not
  modelled (:class:`UnsupportedError`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel import cbuf
from accel.cmod.cdma_image import pixel_format
from accel.cmod.csb import GroupView
from accel.cmod.errors import ConfigError, UnsupportedError
from accel.config import HwConfig

_MISC_BITS = ("DATA_REUSE", "WEIGHT_REUSE", "SKIP_DATA_RLS", "SKIP_WEIGHT_RLS")


@dataclass(frozen=True)
class ConvBuffers:
    """How one convolution uses the CBUF (register values + 1, checked by :func:`check`)."""

    data_banks: int
    weight_banks: int
    entries: int
    weight_bytes: int
    kernels: int
    bytes_per_kernel: int
    image: bool
    width: int            # CDMA DATAIN_WIDTH + 1 (before image padding)
    height: int
    channels: int
    release_rows: int     # CSC RLS_SLICES + 1
    data_reuse: bool
    weight_reuse: bool
    skip_data_rls: bool
    skip_weight_rls: bool
    misc: int             # CDMA D_MISC_CFG, for messages
    weights_total_banks: int   # banks that hold every kernel

    @property
    def weights_resident(self) -> bool:
        """Every weight fits the weight banks at once (otherwise they stream)."""
        return self.weight_banks >= self.weights_total_banks


def _agree(cdma: GroupView, csc: GroupView, register: str, what: str) -> None:
    a, b = cdma(register), csc(register)
    if a != b:
        raise ConfigError("CSC", register, b, f"{what} differs from CDMA.{register} = {a:#x}; "
                                              "CDMA and CSC must program the same CBUF use")


def check(cfg: HwConfig, cdma: GroupView, csc: GroupView) -> ConvBuffers:
    """Read and check the CBUF registers of a direct convolution (see the module doc)."""
    for register, what in (("D_BANK", "the bank split"),
                           ("D_ENTRY_PER_SLICE", "the entries per input row"),
                           ("D_WEIGHT_BYTES", "the weight size")):
        _agree(cdma, csc, register, what)
    for bit in _MISC_BITS:
        if cdma("D_MISC_CFG", bit) != csc("D_MISC_CFG", bit):
            raise ConfigError("CSC", "D_MISC_CFG", csc("D_MISC_CFG"),
                              f"{bit}={csc('D_MISC_CFG', bit)} but CDMA.D_MISC_CFG has "
                              f"{bit}={cdma('D_MISC_CFG', bit)}; CDMA and CSC must agree")
    data_banks = cdma("D_BANK", "DATA_BANK") + 1
    weight_banks = cdma("D_BANK", "WEIGHT_BANK") + 1
    if data_banks + weight_banks > cfg.cbuf_bank_number:
        raise ConfigError("CDMA", "D_BANK", cdma("D_BANK"),
                          f"DATA_BANK+1 ({data_banks}) + WEIGHT_BANK+1 ({weight_banks}) = "
                          f"{data_banks + weight_banks} banks, {cfg.name} has "
                          f"{cfg.cbuf_bank_number}")
    use = _read(cfg, cdma, csc, data_banks, weight_banks)
    _check_data(cfg, cdma, use)
    _check_weights(cfg, cdma, use)
    return use


def _read(cfg: HwConfig, cdma: GroupView, csc: GroupView, data_banks: int,
          weight_banks: int) -> ConvBuffers:
    kernels = cdma("D_WEIGHT_SIZE_1", "WEIGHT_KERNEL") + 1
    bpk = cdma("D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") + 1
    return ConvBuffers(
        data_banks=data_banks, weight_banks=weight_banks,
        entries=cdma("D_ENTRY_PER_SLICE", "ENTRIES") + 1,
        weight_bytes=cdma("D_WEIGHT_BYTES"),
        kernels=kernels, bytes_per_kernel=bpk,
        image=bool(cdma("D_DATAIN_FORMAT", "DATAIN_FORMAT")),
        width=cdma("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1,
        height=cdma("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1,
        channels=cdma("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1,
        release_rows=csc("D_RELEASE", "RLS_SLICES") + 1,
        misc=cdma("D_MISC_CFG"),
        weights_total_banks=cbuf.weight_banks_total(cfg, kernels, bpk),
        **{b.lower(): bool(cdma("D_MISC_CFG", b)) for b in _MISC_BITS})


def _image_entries(cfg: HwConfig, cdma: GroupView, use: ConvBuffers) -> tuple[set[int], str]:
    """Allowed ``ENTRIES + 1`` of an image line, and the line in words."""
    left, right = cdma("D_ZERO_PADDING", "PAD_LEFT"), cdma("D_ZERO_PADDING", "PAD_RIGHT")
    w_ext = left + use.width + right
    # the CBUF receives converted int8 elements (cmod cdma_converted_bytes_per_pixel), NVIDIA's
    # compiler counts the input's bytes per element: they differ for 10/12/16-bit formats
    wide = pixel_format(cdma).element_bytes
    allowed = {cbuf.image_entries_per_slice(cfg, use.channels, w_ext, e) for e in {1, wide}}
    return allowed, (f"a padded image line of {left}+{use.width}+{right} pixels x "
                     f"{use.channels} channels")


def _check_data(cfg: HwConfig, cdma: GroupView, use: ConvBuffers) -> None:
    if use.image:
        allowed, row = _image_entries(cfg, cdma, use)
    else:
        allowed = {cbuf.entries_per_slice(cfg, use.channels, use.width)}
        row = f"an input row of {use.width} pixels x {use.channels} channels"
    if use.entries not in allowed:
        need = " or ".join(str(n) for n in sorted(allowed))
        raise ConfigError("CDMA", "D_ENTRY_PER_SLICE", use.entries - 1,
                          f"ENTRIES+1 = {use.entries}, but {row} takes {need} CBUF entries "
                          f"of {cfg.cbuf_entry_bytes} bytes on {cfg.name}")
    capacity = use.data_banks * cfg.cbuf_bank_depth
    if use.entries * use.height > capacity:
        raise ConfigError("CDMA", "D_BANK", cdma("D_BANK"),
                          f"the input ({use.height} rows x {use.entries} entries = "
                          f"{use.entries * use.height}) does not fit DATA_BANK+1 = "
                          f"{use.data_banks} banks of {cfg.cbuf_bank_depth} entries "
                          f"({capacity}); it needs "
                          f"{-(-use.entries * use.height // cfg.cbuf_bank_depth)} banks")


def _check_weights(cfg: HwConfig, cdma: GroupView, use: ConvBuffers) -> None:
    k, bpk = use.kernels, use.bytes_per_kernel
    lo, hi = k * bpk, cbuf.weight_bytes(k, bpk)
    entry = cfg.cbuf_entry_bytes
    if not lo <= use.weight_bytes <= hi or use.weight_bytes % entry:
        allowed = f"{lo}" if lo == hi else f"{lo}..{hi}"
        raise ConfigError("CDMA", "D_WEIGHT_BYTES", use.weight_bytes,
                          f"{k} kernels x BYTE_PER_KERNEL+1 = {bpk} bytes need WEIGHT_BYTES "
                          f"{allowed} (padded to at most {cbuf.WEIGHT_PAD} bytes), a multiple "
                          f"of the {entry}-byte CBUF entry")
    least = cbuf.weight_banks_min(cfg, k, bpk)
    if use.weight_banks < least:
        group = min(k, cfg.atomic_k)
        raise ConfigError("CDMA", "D_BANK", cdma("D_BANK"),
                          f"WEIGHT_BANK+1 = {use.weight_banks} banks cannot hold one kernel "
                          f"group ({group} kernels x {bpk} bytes); weights need at least "
                          f"{least} banks of {cfg.cbuf_bank_depth} x {entry} bytes")
    if use.skip_weight_rls and not use.weights_resident:
        raise ConfigError("CDMA", "D_MISC_CFG", use.misc,
                          f"SKIP_WEIGHT_RLS keeps the weights, but {k} kernels x {bpk} bytes "
                          f"need {use.weights_total_banks} banks and stream through "
                          f"WEIGHT_BANK+1 = {use.weight_banks}; only weights that fit can stay")


@dataclass(frozen=True)
class KeptWeights:
    """Weights left in the CBUF: the packed bytes as fetched and where they are."""

    raw: np.ndarray       # uint8, kernels * bytes_per_kernel in memory (packed) order
    data_banks: int
    weight_banks: int
    weight_bytes: int
    kernels: int
    bytes_per_kernel: int
    image: bool


@dataclass(frozen=True)
class KeptData:
    """An input left in the CBUF (the cube as the CSC reads it) and its geometry."""

    value: object         # feature cube [C, H, W], or (image lines, pixel format)
    data_banks: int
    entries: int
    width: int
    height: int
    channels: int
    image: bool


def _mismatch(kept: object, now: dict) -> str:
    diffs = [f"{name} {getattr(kept, name)} -> {value}" for name, value in now.items()
             if getattr(kept, name) != value]
    return ", ".join(diffs)


class Cbuf:
    """What the CBUF holds between convolutions (see the module doc)."""

    def __init__(self) -> None:
        self.weights: KeptWeights | None = None
        self.data: KeptData | None = None
        self.partial_rows = 0   # rows a previous op left without SKIP_DATA_RLS

    def reused_weights(self, use: ConvBuffers) -> tuple[KeptWeights | None, str]:
        """The kept weights ``use`` computes with (None: fetch them), and a note."""
        if not use.weight_reuse:
            return None, ""
        kept = self.weights
        if kept is None:
            raise ConfigError("CDMA", "D_MISC_CFG", use.misc,
                              "WEIGHT_REUSE=1 but no weights are kept in the CBUF (the previous "
                              "convolution did not set SKIP_WEIGHT_RLS)")
        if kept.weight_banks != use.weight_banks:
            raise ConfigError("CDMA", "D_MISC_CFG", use.misc,
                              f"WEIGHT_REUSE=1 with WEIGHT_BANK+1 = {use.weight_banks}, but the "
                              f"kept weights are in {kept.weight_banks} banks")
        if kept.data_banks != use.data_banks:
            return None, (f"WEIGHT_REUSE ignored: DATA_BANK+1 changed {kept.data_banks} -> "
                          f"{use.data_banks}, the CBUF is cleared and the weights fetched again")
        diff = _mismatch(kept, {"weight_bytes": use.weight_bytes, "kernels": use.kernels,
                                "bytes_per_kernel": use.bytes_per_kernel, "image": use.image})
        if diff:
            raise ConfigError("CDMA", "D_MISC_CFG", use.misc,
                              f"WEIGHT_REUSE=1 but the kept weights differ ({diff})")
        return kept, ""

    def reused_data(self, use: ConvBuffers) -> KeptData | None:
        """The kept input ``use`` convolves (None: fetch it)."""
        if not use.data_reuse:
            return None
        kept = self.data
        if kept is None:
            if self.partial_rows:
                raise UnsupportedError(
                    f"CDMA.D_MISC_CFG DATA_REUSE: partial reuse of the {self.partial_rows} rows "
                    "the previous convolution kept (CSC D_RELEASE) is not modelled")
            raise ConfigError("CDMA", "D_MISC_CFG", use.misc,
                              "DATA_REUSE=1 but no input is kept in the CBUF (the previous "
                              "convolution did not set SKIP_DATA_RLS)")
        diff = _mismatch(kept, {"data_banks": use.data_banks, "entries": use.entries,
                                "width": use.width, "height": use.height,
                                "channels": use.channels, "image": use.image})
        if diff:
            raise ConfigError("CDMA", "D_MISC_CFG", use.misc,
                              f"DATA_REUSE=1 but the kept input differs ({diff})")
        return kept

    def complete(self, use: ConvBuffers, raw_weights: np.ndarray, data: object) -> None:
        """Record what the finished convolution ``use`` leaves in the CBUF."""
        self.weights = KeptWeights(raw_weights, use.data_banks, use.weight_banks,
                                   use.weight_bytes, use.kernels, use.bytes_per_kernel,
                                   use.image) if use.skip_weight_rls else None
        self.data = KeptData(data, use.data_banks, use.entries, use.width, use.height,
                             use.channels, use.image) if use.skip_data_rls else None
        self.partial_rows = (0 if use.skip_data_rls
                             else max(0, use.height - use.release_rows))
