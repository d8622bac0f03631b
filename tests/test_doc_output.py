"""The comparer of a doc's shown output with what its block prints (tests/doc_output.py)."""

from __future__ import annotations

from .doc_output import Tolerances, command_of, mismatch, tolerances_of


def test_timings_match_anything_and_scores_match_within_their_tolerance() -> None:
    shown = "found in 125.0 ms, indexed in 7.6 s (56 texts/s)\nshop.track_shipment 0.41 (98.8% saved)"
    printed = "found in 9.3 ms, indexed in 12 s (8079 texts/s)\nshop.track_shipment 0.45 (98.1% saved)"
    assert mismatch(shown, printed) is None


def test_integers_and_words_match_exactly() -> None:
    assert mismatch("62 prompt tokens", "63 prompt tokens") is not None
    assert mismatch("support.refund_request", "support.create_ticket") is not None
    assert mismatch("0.41", "0.47") is not None
    assert mismatch("98.8%", "96.0%") is not None


def test_an_elision_line_stands_for_any_number_of_lines() -> None:
    assert mismatch("first\n...\nlast", "first\nlast") is None
    assert mismatch("first\n...\nlast", "first\na\nb\nlast") is None
    assert mismatch("first\n...", "first\nanything\nelse") is None
    assert mismatch("first\n...\nlast", "first\na\nnot last") is not None


def test_table_rules_match_whatever_their_length() -> None:
    assert mismatch("┏━━━━┳━━┓\n│ a  │ 0.5 │", "┏━━━━━━┳━━━┓\n│ a    │ 0.51 │") is None


def test_a_marker_states_its_own_tolerance() -> None:
    assert tolerances_of("output of the block above") == Tolerances()
    loose = tolerances_of("output of the block above, scores ±0.1, percentages ±3")
    assert loose == Tolerances(scores=0.1, percentages=3.0)
    assert mismatch("0.41 at 90%", "0.50 at 92%", loose) is None
    assert tolerances_of("not run by the README test: why") is None


def test_a_marker_may_name_the_command_whose_output_follows() -> None:
    assert command_of("output of `toolrag quickstart`, percentages ±2") == "toolrag quickstart"
    assert tolerances_of("output of `toolrag quickstart`, percentages ±2") == Tolerances(percentages=2.0)
    assert command_of("output of the block above") is None


def test_a_mismatch_reads_as_a_diff() -> None:
    diff = mismatch("all\npayments.refund_payment 0.7754\n", "retrieval\npayments.refund_payment 0.7761\n")
    assert diff is not None
    assert "-all" in diff and "+retrieval" in diff and "shown in the doc" in diff and "printed now" in diff


def test_an_estimated_count_matches_an_exact_one_within_a_tenth() -> None:
    """Issue 50: a plain install estimates token counts and marks them (`~106`); the docs show exact counts."""
    assert mismatch("233 prompt tokens instead of 5182", "~231 prompt tokens instead of ~5202") is None
    assert mismatch("233 prompt tokens", "~300 prompt tokens") is not None
    assert mismatch("233 prompt tokens", "231 prompt tokens") is not None  # exact counts stay exact
