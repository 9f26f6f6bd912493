from __future__ import annotations

import json

import pytest

from tengine_host.quant.table import entry, load_table, save_table, scale_of


def test_entry_is_symmetric_max_abs_over_127():
    assert entry(-2.54, 1.0)["scale"] == pytest.approx(0.02)
    assert entry(0.0, 0.0)["scale"] == pytest.approx(1 / 127)


def test_round_trip_and_min_max_only_entries(tmp_path):
    path = tmp_path / "t.json"
    save_table({"a": entry(-1.0, 0.5)}, path)
    assert load_table(path) == {"a": {"scale": 1 / 127, "min": -1.0, "max": 0.5}}
    path.write_text(json.dumps({"b": {"min": -0.5, "max": 12.7}}))
    assert load_table(path)["b"]["scale"] == pytest.approx(0.1)


def test_bad_tables_are_clear_errors(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"a": {"scale": 0}}))
    with pytest.raises(ValueError, match="'a' has scale 0.0"):
        load_table(path)
    path.write_text(json.dumps({"a": {"max": 1}}))
    with pytest.raises(ValueError, match="needs 'scale' or 'min' and 'max'"):
        load_table(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read calibration table"):
        load_table(path)
    with pytest.raises(KeyError, match="'zz' has no entry"):
        scale_of({}, "zz")
