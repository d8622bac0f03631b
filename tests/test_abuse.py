"""Another client is not stalled while the attacks of the second security review run (issue 25, findings 2, 4 and
16): its latency while an attacker sends them without pause, against its latency without, on the API and on the
gateway, measured side by side in one run (a ratio: absolute figures depend on the machine; tests/abuse.py).
Before the fix one attack held every client for seconds. The bound is the third review's (issue 31): within 3x
of quiet; the benchmark (benchmarks/abuse.py --only untrusted upstreams) publishes the figures (at most 1.41x in two
runs on a loaded 2-core machine, so 3x leaves room for noise)."""

from __future__ import annotations

from pathlib import Path

from .abuse import measure_api, measure_gateway
from .abuse_upstream import measure_upstreams

BOUND = 3  # attacked latency at most this many times quiet


def test_the_api_keeps_answering_while_the_attacks_run(tmp_path: Path) -> None:
    figures = measure_api(tmp_path)
    assert "invalid_arguments" in figures["outcomes"], figures
    for probe, quiet in figures["quiet_ms"].items():
        assert figures["attacked_ms"][probe] <= BOUND * quiet, figures


def test_the_gateway_keeps_finding_tools_while_the_attacks_run(tmp_path: Path) -> None:
    figures = measure_gateway(tmp_path)
    assert figures["refused"] > 0, figures
    assert figures["attacked_ms"]["find_tools"] <= BOUND * figures["quiet_ms"]["find_tools"], figures


def test_issue31_the_gateway_keeps_finding_tools_while_upstreams_attack(tmp_path: Path) -> None:
    """Another principal's find_tools while an upstream answers with 120,000 content parts (the caller waited 20 s,
    everyone else up to 7 s) and beside an upstream whose tool list never ends (the gateway never became ready):
    both attacks are refused, naming the limit, and the victim's latency stays within 3x of quiet
    (benchmarks/abuse.py --only upstreams publishes the figures)."""
    figures = measure_upstreams(tmp_path)
    assert figures["parts_refused"] == figures["parts_answers"] > 0, figures
    assert figures["endless_server"]["state"] != "up", figures
    assert "max_list_pages" in figures["endless_server"]["error"], figures
    for attack, latency in figures["attacked_ms"].items():
        assert latency <= BOUND * figures["quiet_ms"]["find_tools"], (attack, figures)
