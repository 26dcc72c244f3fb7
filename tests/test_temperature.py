"""Cache temperature (issue 24, item 3): a conversation idle past its provider's cache TTL is cut
once, deep enough to last a band, and that cut is carried; a conversation never cold keeps the
stateless band grid."""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.cache import replay, window_policy
from bench.traces import coding_trace, swe_runs
from guard.core.config import Deployment
from guard.core.policy import Policy, PolicySet
from guard.dialects import by_name
from guard.fit.engine import Engine, FitRequest, Judged, Sources
from guard.fit.planner import run
from guard.fit.temperature import UNKNOWN, Anchor, Seen, SeenLog, fingerprint, judge, ttl_seconds
from guard.state.cache import CacheSettings, SummaryCache
from guard.state.seen_store import PREFIX, SeenStore


def test_judge_cold_only_after_the_ttl_and_never_for_a_first_sighting():
    assert judge(None, 1000.0, 300).state == "warm"  # never seen: may be a loop another process served
    assert judge(Seen(700.0), 1000.0, 300).state == "warm"
    cold = judge(Seen(699.0, Anchor(4, 100, 500)), 1000.0, 300)
    assert cold.state == "cold" and cold.idle_seconds == 301.0 and cold.anchor == Anchor(4, 100, 500)
    assert judge(Seen(0.0), 1e9, 0).state == "warm"  # cache_ttl_seconds 0: never cold


def test_ttl_is_the_policys_else_an_hour_where_anthropic_is_asked_for_it_else_five_minutes():
    long = {
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [],
    }
    assert ttl_seconds(None, "anthropic", long) == 3600
    assert ttl_seconds(None, "anthropic", {"messages": []}) == 300
    assert ttl_seconds(None, "openai", long) == 300  # OpenAI has no such field
    assert ttl_seconds(42, "anthropic", long) == 42
    hour = {"type": "ephemeral", "ttl": "1h"}
    nested = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [{"type": "text", "text": "r", "cache_control": hour}],
            }
        ],
    }
    assert ttl_seconds(None, "anthropic", {"messages": [nested]}) == 3600
    assert ttl_seconds(None, "anthropic", {"messages": [], "tools": [{"name": "t", "cache_control": hour}]}) == 3600
    # a tool's input and schema are data: a key named cache_control there asks for nothing
    data = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"cache_control": hour}}],
    }
    schema = {"name": "t", "input_schema": {"type": "object", "properties": {"cache_control": hour}}}
    assert ttl_seconds(None, "anthropic", {"messages": [data], "tools": [schema]}) == 300


def test_the_fingerprint_is_the_conversation_not_the_turn():
    chat = by_name("openai")
    first = {"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]}
    later = {
        **first,
        "messages": first["messages"] + [{"role": "assistant", "content": "a"}, {"role": "user", "content": "more"}],
    }
    other = {**first, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "another task"}]}
    assert fingerprint(chat, first, "m") == fingerprint(chat, later, "m")
    assert fingerprint(chat, first, "m") != fingerprint(chat, other, "m")
    assert fingerprint(chat, first, "m") != fingerprint(chat, first, "m2")


def test_the_fingerprint_of_what_orjson_cannot_write_is_still_the_conversations():
    """A task with a lone surrogate (which orjson refuses) or an integer past 64 bits is
    fingerprinted by `json`: the same conversation keeps one key, another task another, and key
    order inside a message never matters (keys are sorted at every level, either way)."""
    chat = by_name("openai")
    odd = [{"type": "text", "text": "task \ud800", "meta": {"b": 2**70, "a": 1}}]
    reordered = [{"meta": {"a": 1, "b": 2**70}, "text": "task \ud800", "type": "text"}]
    body = {"model": "m", "messages": [{"role": "user", "content": odd}]}
    later = {"model": "m", "messages": [{"content": reordered, "role": "user"}, {"role": "assistant", "content": "a"}]}
    other = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "task \ud801"}]}]}
    plain = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "task", "meta": {"b": 1}}]}],
    }
    swapped = {
        "model": "m",
        "messages": [{"content": [{"meta": {"b": 1}, "text": "task", "type": "text"}], "role": "user"}],
    }
    assert fingerprint(chat, body, "m") == fingerprint(chat, later, "m") != fingerprint(chat, other, "m")
    assert fingerprint(chat, plain, "m") == fingerprint(chat, swapped, "m")


def test_the_log_is_bounded_and_never_goes_back_in_time():
    log = SeenLog(entries=3)
    for i in range(5):
        log.put(f"c{i}", Seen(float(i)))
    assert len(log) == 3 and log.get("c0") is None and log.get("c4") == Seen(4.0)
    log.put("c4", Seen(1.0))  # an older record (another worker's, read late) does not win
    assert log.get("c4") == Seen(4.0)
    assert Seen.from_json(Seen(5.0, Anchor(1, 2, 3)).to_json()) == Seen(5.0, Anchor(1, 2, 3))
    assert Seen.from_json(Seen(5.0, Anchor(1, 2, 3, 900)).to_json()) == Seen(5.0, Anchor(1, 2, 3, 900))
    assert Anchor.from_dict({"length": 1, "mark": 2, "prefix_tokens": 3}) == Anchor(1, 2, 3, 0)  # (written before)
    assert Anchor.from_dict({"length": 1, "mark": 2, "prefix_tokens": 3, "room": True}) is None
    assert Seen.from_json("not json") is None and Seen.from_json('{"at": true}') is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _engine(window: int, clock: Clock, **settings) -> Engine:
    policy = Policy(default_max_tokens=256, safety_margin_tokens=0, safety_margin_ratio=0.0, **settings)
    return Engine(
        PolicySet(defaults=policy),
        deployments={"small": Deployment("small", "gpt-4o", {"max_input_tokens": window})},
        model_map={},
        sources=Sources(clock=clock),
    )


def _turns(body, start):
    for end in range(start, len(body["messages"]) + 1, 2):
        yield {**body, "messages": body["messages"][:end]}


def test_a_cold_turn_anchors_its_cut_at_the_bottom_of_the_band_and_later_turns_carry_it():
    body = coding_trace(turns=120, seed=5)
    clock = Clock()
    engine = _engine(9_000, clock)
    turns = list(_turns(body, 80))
    for turn in turns[:5]:
        clock.now += 5
        engine.fit(turn, model="small")
    clock.now += 600  # past the 5-minute TTL
    cold = engine.fit(turns[5], model="small")
    report = cold.report
    assert report.cache_temperature == "cold" and report.idle_seconds == 600.0
    assert report.anchor is not None and report.anchor["length"] == len(turns[5]["messages"])
    # cut to the bottom of the band (target - band), not above it
    assert report.input_tokens_after <= report.target - int(report.room * 0.35) + 1
    previous, carried = cold, 0
    for turn in turns[6:]:
        clock.now += 5
        fitted = engine.fit(turn, model="small")
        assert fitted.report.cache_temperature == "warm" and fitted.report.anchor is not None
        if fitted.report.anchor == previous.report.anchor:
            carried += 1
            before = previous.body["messages"]
            assert json.dumps(fitted.body["messages"][: len(before)]) == json.dumps(before)
            assert fitted.report.input_tokens_after <= fitted.report.target
        else:  # the anchor stopped fitting under the target: anchored anew, on this turn
            assert fitted.report.anchor["length"] == len(turn["messages"])
        previous = fitted
    assert carried >= 10


def test_without_a_cold_turn_the_band_grid_is_unchanged():
    body = coding_trace(turns=120, seed=5)
    clock = Clock()
    judged, blind = _engine(9_000, clock), _engine(9_000, clock, cache_ttl_seconds=0)
    cut = 0
    for turn in _turns(body, 60):
        clock.now += 5
        a, b = judged.fit(turn, model="small"), blind.fit(turn, model="small")
        cut += a.report.cut is not None
        assert a.body == b.body and a.report.anchor is None and a.report.cache_temperature == "warm"
    assert cut >= 20


def test_an_unknown_temperature_is_treated_as_warm_and_not_recorded():
    body = coding_trace(turns=120, seed=5)
    clock = Clock()
    engine = _engine(9_000, clock)
    turn = next(_turns(body, 100))
    clock.now = 10_000
    fitted = run(engine.plan_for(FitRequest(turn, model="small", judged=Judged(temperature=UNKNOWN))))
    assert fitted.report.cut is not None
    assert fitted.report.cache_temperature == "unknown" and fitted.report.anchor is None
    assert len(engine.conversations) == 0


def test_an_anchor_of_another_history_with_the_same_task_is_not_used():
    body = coding_trace(turns=120, seed=5)
    clock = Clock()
    engine = _engine(9_000, clock)
    turn = next(_turns(body, 100))
    key = engine.conversation_key(turn, "small")
    engine.conversations.put(key, Seen(0.0, Anchor(length=50, mark=5_000, prefix_tokens=1)))  # counts do not match
    clock.now = 5.0
    fitted = engine.fit(turn, model="small")
    blind = _engine(9_000, clock, cache_ttl_seconds=0).fit(turn, model="small")
    assert fitted.report.cut is not None
    assert fitted.body == blind.body and fitted.report.anchor is None


@pytest.mark.parametrize("name,body", swe_runs()[:1], ids=[n for n, _ in swe_runs()[:1]])
def test_a_real_loop_with_idle_pauses_costs_less_when_the_guard_knows_the_cache_is_cold(name, body):
    """A real SWE-bench run with a 10-minute pause every 15 turns (past the provider's 5-minute
    TTL): cutting deep on the cold turns lowers the bill against the same replay without cache
    temperature (0.73 -> 0.61 of the untrimmed loop's); without pauses nothing changes."""
    policy = window_policy(body, 0.5)
    blind = policy.model_copy(update={"cache_ttl_seconds": 0})
    base = replay(name, body, None, gaps=(15, 600))
    warm, judged = replay(name, body, blind, gaps=(15, 600)), replay(name, body, policy, gaps=(15, 600))
    assert judged.rejected == warm.rejected == 0
    assert judged.cost("anthropic") < warm.cost("anthropic") * 0.95
    assert min(judged.room_used) >= 0.6
    assert sum(t.broken for t in judged.turns) == 0
    plain, plain_blind = replay(name, body, policy), replay(name, body, blind)
    assert [(t.sent, t.cached) for t in plain.turns] == [(t.sent, t.cached) for t in plain_blind.turns]
    assert judged.cost("anthropic") / base.cost("anthropic") <= 0.7


class FakeRedis:
    def __init__(self, fail: bool = False) -> None:
        self.data: dict[str, str] = {}
        self.fail = fail

    async def get(self, key):
        if self.fail:
            raise ConnectionError("down")
        return self.data.get(key)

    async def set(self, key, value, ex=None):
        if self.fail:
            raise ConnectionError("down")
        self.data[key] = value


def test_the_shared_store_carries_the_record_between_workers_and_says_when_it_failed():
    shared = FakeRedis()
    one, two = SeenLog(), SeenLog()
    store_one = SeenStore(SummaryCache(CacheSettings(memory_entries=0), shared=shared), one)
    store_two = SeenStore(SummaryCache(CacheSettings(memory_entries=0), shared=shared), two)
    one.put("c", Seen(100.0, Anchor(3, 40, 90)))
    asyncio.run(store_one.record("c"))
    assert list(shared.data) == [PREFIX + "c"]
    assert asyncio.run(store_two.fresh("c")) is True and two.get("c") == Seen(100.0, Anchor(3, 40, 90))
    down = SeenStore(SummaryCache(CacheSettings(memory_entries=0), shared=FakeRedis(fail=True)), SeenLog())
    assert asyncio.run(down.fresh("c")) is False
    alone = SeenStore(SummaryCache(CacheSettings(memory_entries=0)), SeenLog())
    assert asyncio.run(alone.fresh("c")) is True  # no shared store: the log is the record
