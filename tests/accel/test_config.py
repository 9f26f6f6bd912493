from __future__ import annotations

import dataclasses
import re

import pytest

from accel.config import PRESETS, HwConfig, get_preset, knob_names
from tests.conftest import shared_path


def test_unknown_preset_lists_valid_names():
    with pytest.raises(ValueError, match=r"preset 'nv_tiny' not in nv_small, nv_small_256"):
        get_preset("nv_tiny")


def test_every_v2_preset_and_nv_full_exist():
    assert set(PRESETS) == {"nv_small", "nv_small_256", "nv_small_256_full", "nv_medium_512",
                            "nv_medium_1024_full", "nv_large", "nv_full"}


def test_derived_sizes_nv_small():
    cfg = get_preset("nv_small")
    assert (cfg.atomic_c, cfg.atomic_k, cfg.atom_size) == (8, 8, 8)
    assert cfg.cbuf_size == 128 * 1024 and cfg.mac_count == 64
    assert cfg.mac_result_bits == 19 and get_preset("nv_large").mac_result_bits == 22


def test_config_is_frozen_and_validated():
    cfg = get_preset("nv_small")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.mac_atomic_c_size = 16  # type: ignore[misc]
    with pytest.raises(ValueError, match="mac_atomic_k_size=6"):
        dataclasses.replace(cfg, mac_atomic_k_size=6)


_FLAG = re.compile(r"^#define\s+([A-Z0-9_]+?)_(ENABLE|DISABLE)\s*$")
_SIZE = re.compile(r"^#define\s+([A-Z_]+?)_(\d+|x)\s*$")


def _spec_knobs(text: str) -> dict[str, object]:
    knobs: dict[str, object] = {}
    for line in text.splitlines():
        line = line.strip()
        if m := _FLAG.match(line):
            knobs[m.group(1).lower()] = m.group(2) == "ENABLE"
        elif m := _SIZE.match(line):
            name = m.group(1).lower()
            knobs[name] = 0 if m.group(2) == "x" else int(m.group(2))
        elif line.startswith("#define FEATURE_DATA_TYPE_") or line.startswith(
                "#define WEIGHT_DATA_TYPE_"):
            knobs[line.split()[1].lower()] = True
    return knobs


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_match_nvdla_spec_files(name):
    spec = shared_path("nvdla", "rdl", f"{name}.spec").read_text()
    knobs = _spec_knobs(spec)
    cfg = PRESETS[name]
    fields = set(knob_names())
    checked = 0
    for knob, value in knobs.items():
        if knob in fields:
            assert getattr(cfg, knob) == value, f"{name}: {knob}"
            checked += 1
    assert checked >= 25
    assert isinstance(cfg, HwConfig)
