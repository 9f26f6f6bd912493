"""The fast subset of ``scripts/bad_input_audit.py``: one case of each class of bad input
the audit found (a table entry of the wrong type, NaN, a saturating input, a 16-bit image
for an RGB model, -s 0, --plot in a format matplotlib cannot write, a corrupt model, a
malformed trace), each run as an ``opendla`` subprocess and expected to be refused with
exit 2 and one ``error:`` line, warned about, or (images) read by value."""

from __future__ import annotations

from scripts.bad_input_audit import audit, cases


def test_the_audit_has_at_least_40_cases_and_a_fast_subset():
    all_cases = cases()
    assert len(all_cases) >= 40 and len({c.name for c in all_cases}) == len(all_cases)
    assert 5 <= sum(c.fast for c in all_cases) <= 12


def test_fast_bad_inputs_are_clean():
    results = audit(fast=True, timeout=300)
    assert len(results) == sum(c.fast for c in cases())
    bad = [f"{r.case.name}: {r.verdict} ({r.detail})" for r in results if r.verdict != "clean"]
    assert not bad, "\n".join(bad)
