"""Hardware configuration of an NVDLA-class accelerator.

One frozen dataclass, :class:`HwConfig`, holds the primitive knobs of a
configuration, named after the ``#define`` switches of NVDLA's
``spec/defs/<preset>.spec`` files (``MAC_ATOMIC_C_SIZE_8`` becomes
``mac_atomic_c_size=8``, ``SDP_LUT_ENABLE`` becomes ``sdp_lut=True``).
Everything derived from them (CBUF size, MAC count, memory width in bytes) is a
property, so there is one place where each value is defined.

``PRESETS`` holds every configuration of the NVDLA v2 tree plus ``nv_full``
(v1).  Variants are made with :func:`dataclasses.replace`; there is no global
"current" configuration: the config is passed explicitly to whoever needs it.

>>> cfg = get_preset("nv_small")
>>> cfg.atomic_c, cfg.atomic_k, cfg.atom_size, cfg.cbuf_size
(8, 8, 8, 131072)
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class HwConfig:
    """Primitive knobs of one NVDLA configuration (spec names, lower case)."""

    name: str
    # data types (v2 configurations are int8-only; nv_full adds int16/fp16)
    feature_data_type_int8: bool = True
    feature_data_type_int16: bool = False
    feature_data_type_fp16: bool = False
    weight_data_type_int8: bool = True
    weight_data_type_int16: bool = False
    weight_data_type_fp16: bool = False
    # optional features
    weight_compression: bool = False
    winograd: bool = False
    batch: bool = False
    secondary_memif: bool = False
    sdp_lut: bool = False
    sdp_bs: bool = True
    sdp_bn: bool = True
    sdp_ew: bool = False
    bdma: bool = False
    rubik: bool = False
    rubik_contract: bool = False
    rubik_reshape: bool = False
    pdp: bool = True
    cdp: bool = True
    retiming: bool = False
    # sizes
    mac_atomic_c_size: int = 8
    mac_atomic_k_size: int = 8
    memory_atomic_size: int = 8
    max_batch_size: int = 0  # 0: the spec leaves it undefined ("x")
    cbuf_bank_number: int = 32
    cbuf_bank_width: int = 8
    cbuf_bank_depth: int = 512
    # throughputs (elements per cycle; 0 where the unit is absent)
    sdp_bs_throughput: int = 1
    sdp_bn_throughput: int = 1
    sdp_ew_throughput: int = 0
    pdp_throughput: int = 1
    cdp_throughput: int = 1
    # memory interfaces
    primary_memif_latency: int = 64
    secondary_memif_latency: int = 0
    primary_memif_max_burst_length: int = 1
    primary_memif_width: int = 64  # bits
    secondary_memif_max_burst_length: int = 0
    secondary_memif_width: int = 0
    mem_address_width: int = 32
    num_dma_read_clients: int = 7
    num_dma_write_clients: int = 3

    def __post_init__(self) -> None:
        for knob in ("mac_atomic_c_size", "mac_atomic_k_size", "memory_atomic_size",
                     "cbuf_bank_number", "cbuf_bank_width", "cbuf_bank_depth"):
            value = getattr(self, knob)
            if value <= 0 or value & (value - 1):
                raise ValueError(f"{self.name}: {knob}={value!r} must be a positive power of two")
        if self.mac_atomic_c_size < self.memory_atomic_size:
            raise ValueError(
                f"{self.name}: mac_atomic_c_size={self.mac_atomic_c_size} is smaller than "
                f"memory_atomic_size={self.memory_atomic_size}")

    # --- short names used throughout the code -----------------------------------
    @property
    def atomic_c(self) -> int:
        """Input channels consumed per MAC cell per cycle (MAC_ATOMIC_C_SIZE)."""
        return self.mac_atomic_c_size

    @property
    def atomic_k(self) -> int:
        """Kernels (output channels) computed in parallel (MAC_ATOMIC_K_SIZE)."""
        return self.mac_atomic_k_size

    @property
    def atom_size(self) -> int:
        """Bytes of one memory atom = int8 channels per feature-cube atom."""
        return self.memory_atomic_size

    @property
    def mac_count(self) -> int:
        return self.mac_atomic_c_size * self.mac_atomic_k_size

    @property
    def cbuf_entry_bytes(self) -> int:
        """Bytes of one CBUF entry (one bank row)."""
        return self.cbuf_bank_width

    @property
    def cbuf_bank_bytes(self) -> int:
        return self.cbuf_bank_width * self.cbuf_bank_depth

    @property
    def cbuf_size(self) -> int:
        return self.cbuf_bank_number * self.cbuf_bank_bytes

    @property
    def dma_bytes_per_cycle(self) -> int:
        """Primary memory interface width in bytes (one beat per cycle)."""
        return self.primary_memif_width // 8

    @property
    def cmac_cells(self) -> int:
        """MAC cells in each of CMAC_A and CMAC_B (ATOMIC_K / 2)."""
        return self.mac_atomic_k_size // 2

    @property
    def mac_result_bits(self) -> int:
        """Width of one MAC cell's sum: 2*8 + log2(ATOMIC_C) (NVDLA_MAC_RESULT_WIDTH)."""
        return 16 + self.mac_atomic_c_size.bit_length() - 1

    @property
    def int8_only(self) -> bool:
        return not (self.feature_data_type_int16 or self.feature_data_type_fp16)


def knob_names() -> list[str]:
    """Names of the primitive knobs, in declaration order (``name`` excluded)."""
    return [f.name for f in fields(HwConfig) if f.name != "name"]


_SMALL = dict(
    mac_atomic_c_size=8, mac_atomic_k_size=8, memory_atomic_size=8,
    cbuf_bank_number=32, cbuf_bank_width=8, cbuf_bank_depth=512,
)

PRESETS: dict[str, HwConfig] = {
    "nv_small": HwConfig(name="nv_small", **_SMALL),
    "nv_small_256": HwConfig(
        name="nv_small_256", mac_atomic_c_size=32, mac_atomic_k_size=8, memory_atomic_size=8,
        cbuf_bank_number=32, cbuf_bank_width=32, cbuf_bank_depth=128,
    ),
    "nv_small_256_full": HwConfig(
        name="nv_small_256_full", mac_atomic_c_size=32, mac_atomic_k_size=8,
        memory_atomic_size=8, cbuf_bank_number=32, cbuf_bank_width=32, cbuf_bank_depth=128,
        secondary_memif=True, sdp_lut=True, sdp_ew=True,
        sdp_bs_throughput=2, sdp_bn_throughput=2, sdp_ew_throughput=1,
        secondary_memif_latency=64, primary_memif_max_burst_length=4,
        secondary_memif_max_burst_length=4, secondary_memif_width=64, num_dma_read_clients=8,
    ),
    "nv_medium_512": HwConfig(
        name="nv_medium_512", mac_atomic_c_size=32, mac_atomic_k_size=16, memory_atomic_size=16,
        cbuf_bank_number=32, cbuf_bank_width=32, cbuf_bank_depth=512,
        sdp_bs_throughput=4, sdp_bn_throughput=4, pdp_throughput=2, cdp_throughput=2,
        primary_memif_latency=256, primary_memif_max_burst_length=4, primary_memif_width=128,
        mem_address_width=64,
    ),
    "nv_medium_1024_full": HwConfig(
        name="nv_medium_1024_full", mac_atomic_c_size=32, mac_atomic_k_size=32,
        memory_atomic_size=32, cbuf_bank_number=32, cbuf_bank_width=32, cbuf_bank_depth=512,
        secondary_memif=True, sdp_lut=True, sdp_ew=True,
        sdp_bs_throughput=8, sdp_bn_throughput=8, sdp_ew_throughput=2,
        pdp_throughput=4, cdp_throughput=4,
        primary_memif_latency=1024, secondary_memif_latency=1024,
        primary_memif_max_burst_length=4, primary_memif_width=256,
        secondary_memif_max_burst_length=4, secondary_memif_width=256,
        mem_address_width=64, num_dma_read_clients=8,
    ),
    "nv_large": HwConfig(
        name="nv_large", mac_atomic_c_size=64, mac_atomic_k_size=32, memory_atomic_size=32,
        max_batch_size=32, cbuf_bank_number=16, cbuf_bank_width=64, cbuf_bank_depth=512,
        secondary_memif=True, sdp_lut=True, sdp_ew=True,
        sdp_bs_throughput=16, sdp_bn_throughput=16, sdp_ew_throughput=4,
        pdp_throughput=8, cdp_throughput=8,
        primary_memif_latency=1024, secondary_memif_latency=1024,
        primary_memif_width=256, secondary_memif_max_burst_length=1, secondary_memif_width=256,
        mem_address_width=64, num_dma_read_clients=8,
    ),
    "nv_full": HwConfig(
        name="nv_full", feature_data_type_int16=True, feature_data_type_fp16=True,
        weight_data_type_int16=True, weight_data_type_fp16=True,
        weight_compression=True, winograd=True, batch=True, secondary_memif=True,
        sdp_lut=True, sdp_ew=True, bdma=True, rubik=True, rubik_contract=True,
        rubik_reshape=True, retiming=False,
        mac_atomic_c_size=64, mac_atomic_k_size=32, memory_atomic_size=32,
        max_batch_size=32, cbuf_bank_number=16, cbuf_bank_width=64, cbuf_bank_depth=512,
        sdp_bs_throughput=16, sdp_bn_throughput=16, sdp_ew_throughput=4,
        pdp_throughput=8, cdp_throughput=8,
        primary_memif_latency=1200, secondary_memif_latency=128,
        primary_memif_width=512, secondary_memif_max_burst_length=4,
        secondary_memif_width=512, mem_address_width=64, num_dma_read_clients=8,
    ),
}

DEFAULT_PRESET = "nv_small"


def get_preset(name: str) -> HwConfig:
    """Return the preset called ``name``; the error lists the valid names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"preset {name!r} not in {', '.join(PRESETS)}") from None
