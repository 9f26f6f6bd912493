from __future__ import annotations

import pytest

from accel.backends import BACKENDS, get_backend
from accel.config import get_preset
from accel.runtime.backend import Backend
from tests.accel.runtime.fake_backend import FakeBackend


def test_unknown_backend_lists_valid_names():
    with pytest.raises(ValueError, match=r"backend 'verilator' not in cmod"):
        get_backend("verilator", get_preset("nv_small"))
    assert "cmod" in BACKENDS


def test_fake_satisfies_protocol():
    assert isinstance(FakeBackend(), Backend)
