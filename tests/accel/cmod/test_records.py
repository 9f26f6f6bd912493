"""OpRecord: typed per-operation records and their JSON view."""

import json

from accel.cmod.records import OpRecord


def test_as_dict_is_json_with_the_fused_sdp_nested():
    sdp = OpRecord("SDP", 64, (8, 2, 2), {"flying": True}, note="Y stage modelled")
    conv = OpRecord("CONV", 128, {"in": (8, 4, 4), "out": (8, 2, 2)},
                    {"mac_atoms": 32, "cbuf": {"data": "fetched"}}, sdp=sdp)
    d = conv.as_dict()
    assert d == {"unit": "CONV", "cycles": 128, "shape": {"in": [8, 4, 4], "out": [8, 2, 2]},
                 "mac_atoms": 32, "cbuf": {"data": "fetched"},
                 "sdp": {"unit": "SDP", "cycles": 64, "shape": [8, 2, 2], "flying": True,
                         "note": "Y stage modelled"}}
    assert json.loads(json.dumps(d)) == d
