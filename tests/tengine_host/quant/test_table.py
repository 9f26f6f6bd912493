from __future__ import annotations

import json
import re

import pytest

from tengine_host.quant.table import entry, load_table, save_table, scale_of, zero_point_of


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


def test_zero_points_are_optional_integers_in_int8(tmp_path):
    path = tmp_path / "t.json"
    save_table({"a": {"scale": 0.5, "zero_point": -128}, "b": {"scale": 0.25}}, path)
    table = load_table(path)
    assert table["a"] == {"scale": 0.5, "zero_point": -128}
    assert isinstance(table["a"]["zero_point"], int)
    assert (table.zero_point("a"), table.zero_point("b")) == (-128, 0)   # absent: 0
    assert zero_point_of({"c": {"scale": 1.0, "zero_point": 3}}, "c") == 3
    with pytest.raises(KeyError, match="'zz' has no entry"):
        zero_point_of({}, "zz")


@pytest.mark.parametrize("value", [128, -129, 1.5, -128.0, "0", True, None])
def test_bad_zero_points_name_the_tensor_and_the_value(tmp_path, value):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"relu_out": {"scale": 0.1, "zero_point": value}}))
    with pytest.raises(ValueError, match=r"'relu_out' has zero_point .* integer in \[-128, 127\]"):
        load_table(path)


@pytest.mark.parametrize("key, value, allowed", [
    ("scale", None, "finite number"), ("scale", [0.1], "finite number"),
    ("scale", {"v": 0.1}, "finite number"), ("scale", "0.1", "finite number"),
    ("scale", True, "finite number"), ("min", None, "finite number"),
    ("max", [1.0], "finite number"), ("zero_point", 1.5, r"integer in \[-128, 127\]"),
    ("zero_point", "3", r"integer in \[-128, 127\]"), ("zero_point", None,
                                                      r"integer in \[-128, 127\]"),
])
def test_entries_of_the_wrong_type_name_the_file_entry_and_what_is_allowed(tmp_path, key,
                                                                           value, allowed):
    """JSON null, lists, objects, strings and booleans were TypeError tracebacks (or, for
    true, a scale of 1)."""
    from tengine_host.errors import TengineInputError

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"act": {"scale": 0.5, "min": -1.0, "max": 1.0, key: value}}))
    with pytest.raises(TengineInputError) as info:
        load_table(path)
    msg = str(info.value)
    assert str(path) in msg and "'act'" in msg and key in msg, msg
    assert json.dumps(value) in msg or repr(value) in msg, msg        # the bad value
    assert re.search(allowed, msg), msg


def test_an_entry_that_is_not_an_object_is_named(tmp_path):
    from tengine_host.errors import TengineInputError

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"act": [1]}))
    with pytest.raises(TengineInputError, match=r"t\.json.*'act' must be an object.*\[1\]"):
        load_table(path)
