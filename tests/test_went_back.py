"""A client that goes back to an earlier turn and sends it again (an agent rewound to a turn, a
harness that retries a step, an SDK's retry of a request sent before the last one) gets the bytes
that turn got, which the provider's cache holds: the conversation's record keeps the cuts its
rollout carried before its last one (`Seen.earlier`, `LastCut.went_back`), each with the turns that
carried it (`since` to `history`). Without them, a turn sent again after a later cut was decided by
the replay, which counts the past with today's room and factor and the history as the client
sends it now: another cut where `max_tokens` changes turn by turn, the learned factor changed, or
the client edits its history (`bench.replicas --resends rewind:5,4` at 50%: 55, 39 and 18 rows of
113 differed, session 70)."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.replicas import resent
from guard.core.errors import ContextWindowExceeded
from guard.dialects import by_name
from guard.fit.edited import LastCut
from guard.fit.engine import Engine
from guard.fit.temperature import ROLLOUT_CUTS, Seen, Temperature
from tests.strategies import long_agent_loop
from tests.test_carry_while_fits import _engine
from tests.test_properties import _growing

EXAMPLES = {"ci": 30, "dev": 20}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 1000)
CHAT = by_name("openai")


def _history(turns: int) -> tuple[list[dict[str, Any]], list[int]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}"},
        ]
    return msgs, [5, 3, *([9, 12] * turns)]


def test_a_cut_is_known_by_the_turns_that_carried_it_and_a_shorter_one_of_them_went_back():
    msgs, counts = _history(5)  # 12 messages
    cut = LastCut.of(CHAT, msgs[:8], counts[:8], (6, 20))  # first sent with 8 messages
    assert (cut.length, cut.since, cut.history) == (6, 8, 8)
    later = cut.carried(counts)  # carried up to 12
    assert (later.since, later.history) == (8, 12) and not later.changed(counts)
    assert [later.carried_by(n) for n in (6, 7, 8, 10, 12, 13)] == [False, False, True, True, True, False]
    assert later.went_back(counts[:10]) and later.of_this(CHAT, msgs[:10], counts[:10])
    assert not later.changed(counts[:10])
    stubbed = [*counts[:3], 2, *counts[4:10]]  # went back, the client stubbing a result the cut was made on
    assert later.of_this(CHAT, msgs[:10], stubbed) and later.changed(stubbed) and later.taken(stubbed) == 10
    # before its first turn (the turns the cut was made on, not sent with it), or not of this rollout
    assert not later.of_this(CHAT, msgs[:6], counts[:6]) and not later.went_back(counts[:7])
    other = [*msgs[:2], {**msgs[2], "tool_calls": [{**msgs[2]["tool_calls"][0], "id": "c9"}]}, *msgs[3:10]]
    assert not later.of_this(CHAT, other, counts[:10])
    # a record written before `since` was: carried from the cut's own length on
    old = {k: v for k, v in later.to_dict().items() if k != "since"}
    assert LastCut.from_dict(old) is not None and LastCut.from_dict(old).carried_by(6)  # type: ignore[union-attr]
    assert LastCut.from_dict(later.to_dict()) == later
    assert LastCut.from_dict({**later.to_dict(), "since": -1}) is None


def test_the_record_keeps_the_cuts_a_rollout_carried_before_its_last():
    msgs, counts = _history(10)  # 22 messages
    spans = ((8, 11), (12, 13), (14, 17), (18, 18))  # the turns (their messages) that carried each cut
    cuts = [LastCut.of(CHAT, msgs[:s], counts[:s], (s - 4, 20 + s)).carried(counts[:h]) for s, h in spans]
    seen = Seen(0.0)
    for at, cut in enumerate(cuts):
        before = Temperature("warm", 1.0, None, seen.last, seen.others, seen.earlier)
        seen = Seen.kept(float(at), None, cut, before, cut.rollout)
    assert seen.last == cuts[-1] and seen.earlier == (cuts[-2], cuts[-3])[: ROLLOUT_CUTS - 1]
    assert Seen.from_json(seen.to_json()) == seen
    assert Seen.from_json(json.dumps({"at": 1.0, "last": None})) == Seen(1.0)  # (a record written before)
    now = Temperature("warm", 1.0, None, seen.last, seen.others, seen.earlier)
    assert [now.cut_for(n) for n in (9, 12, 13, 15, 18, 20)] == [cuts[3], cuts[1], cuts[1], cuts[2], cuts[3], cuts[3]]
    # a turn shorter than the last also tries the last cut, right after the earlier one it carries
    # first (a client that slid its window past more messages than it added, `guard.fit.slid`)
    assert now.records(13)[:2] == (cuts[1], cuts[3]) and now.records(20) == (cuts[3],)
    # a turn that fits whole keeps them all; the same cut made again keeps the turn it was first sent with
    before = Temperature("warm", 1.0, None, seen.last, seen.others, seen.earlier)
    whole = Seen.kept(9.0, None, None, before, cuts[-1].rollout)
    assert whole.last is None and whole.earlier == (cuts[-1], cuts[-2], cuts[-3])[:ROLLOUT_CUTS]
    again = LastCut.of(CHAT, msgs, counts, (14, 38))  # (first sent with 22 messages, as far as it knows)
    kept = Seen.kept(10.0, None, again, before, again.rollout)
    assert again.since == 22 and (kept.last.since, kept.earlier) == (18, seen.earlier)  # type: ignore[union-attr]
    # a turn that went back carries an earlier cut: it is the last now, and the one it went back from earlier
    back = Seen.kept(11.0, None, cuts[1].carried(counts[:13]), before, cuts[1].rollout)
    assert back.last == cuts[1].carried(counts[:13]) and back.earlier == (cuts[3], cuts[2])
    # the branch goes on from there with its own cut, not the one the turns it went back from carried
    branch = Temperature("warm", 1.0, None, back.last, back.others, back.earlier)
    assert branch.cut_for(15) == back.last and branch.cut_for(12) == back.last


def outputs_in_turn(case: tuple[dict[str, Any], dict[str, Any]], outputs: list[int]) -> tuple[str, list[Any], Engine]:
    """A drawn growing loop (`long_agent_loop`) whose client sets `max_tokens` turn by turn
    (`outputs`, in turn): its dialect, its requests, and the engine that serves them at the drawn
    share of the loop's size (plus the largest output)."""
    body, settings_ = case
    dialect = settings_["dialect"]
    limit = "max_output_tokens" if "input" in body else "max_tokens"
    turns = [{**t, limit: outputs[i % len(outputs)]} for i, t in enumerate(_growing(body))]
    full_size = _engine(dialect, 10**7, settings_).fit(turns[-1], dialect=dialect).report.input_tokens_before
    return dialect, turns, _engine(dialect, int(full_size * settings_["share"]) + max(outputs), settings_)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.one_of(long_agent_loop(), long_agent_loop(questions=True)),
    st.lists(st.integers(64, 256), min_size=2, max_size=4),
    st.sampled_from(["rewind:5,4", "rewind:7,3", "rewind:4,6"]),
)
def test_a_turn_sent_again_gets_the_bytes_it_got_while_the_record_knows_its_cut(case, outputs, rewinds):
    """A growing conversation whose client sets `max_tokens` turn by turn (`outputs`, in turn) and
    goes back now and then (`rewinds`: after every E-th turn, the B turns before it and that one
    again). A turn sent again goes byte for byte as it went the first time, or is refused again,
    wherever its cut is one of the last `ROLLOUT_CUTS` cuts the conversation sent and the turn is
    among those that carried it (a turn that went whole goes whole). Before session 70 such turns
    were decided by the replay. (A client that also stubs its old results is checked on real loops,
    below and by `bench.replicas --client`: on drawn loops whose stubs take a cut history whole
    again, some turns sent again still go otherwise, session 70.)"""
    from bench.cache import fit

    dialect, turns, engine = outputs_in_turn(case, outputs)
    first: dict[int, tuple[str, tuple[Any, ...] | None]] = {}
    known: list[list[Any]] = []  # the cuts sent, the latest first: [cut, first turn, last turn]
    checked = 0
    for t in resent(len(turns), rewinds):
        try:
            fitted = fit(engine, turns[t], None, dialect)
            sent, cut = json.dumps(fitted.body), _cut_of(fitted.report.carried)
        except ContextWindowExceeded:
            sent, cut = "refused", None
        if t in first:
            then = first[t][1]
            held = next((k for k in known[:ROLLOUT_CUTS] if k[0] == then), None)
            if then is None or (held is not None and held[1] <= t <= held[2]):
                assert sent == first[t][0], (t, then, cut)
                checked += 1
        else:
            first[t] = (sent, cut)
        if cut is not None:
            held = next((k for k in known if k[0] == cut), [cut, t, t])
            known = [[cut, held[1], t], *(k for k in known if k[0] != cut)]
    # (where the cuts change every turn or two, every turn sent again may be further back than it reaches)
    assert checked or len(known) > ROLLOUT_CUTS


def _cut_of(carried: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What tells a carried cut from another (`LastCut.same_cut`), from a report's record of it."""
    return None if carried is None else tuple(carried[k] for k in ("length", "mark", "prefix_tokens", "room", "factor"))


def test_real_loops_sent_again_go_as_they_went():
    """Real loops, a turn sent again after later ones (`bench.replicas --resends`): a LiveMCPBench
    run whose client draws `max_tokens` per request, and tau2's retail agent whose client stubs all
    but its newest five results, each rewound now and then at half its size. Every turn sent again
    goes with the bytes it went with (session 69's guard sent 10 and 3 of them otherwise)."""
    from bench.replicas import resends_differing

    for name, client, outputs, resends in (
        ("livemcp/4d7582c4", None, "2048-2303", "rewind:5,4"),
        ("tau2/retail_32", "last_n_observations:5", None, "rewind:6,2"),
    ):
        assert resends_differing((name, 0.5, False, None, client, "", outputs, None, resends))[2] == []
