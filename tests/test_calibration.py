"""Calibration from provider usage (issue 12): the pure rules, the engine using them, the store."""

from __future__ import annotations

import asyncio
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.core import calibration
from guard.core.config import CacheSettings, Deployment
from guard.core.policy import Policy, PolicySet
from guard.fit.engine import Engine
from guard.state.cache import SummaryCache
from guard.state.calibration_store import CalibrationStore

AUTO = calibration.Settings(mode="auto", floor=0.5, cap=3.0, min_observations=5, headroom=0.0)
ratios = st.lists(st.floats(-10, 100) | st.sampled_from([float("nan"), float("inf"), 0.0, 1e9]), max_size=300)


@given(ratios, st.floats(1.0, 2.0), st.none() | st.floats(0.1, 10.0))
def test_the_factor_stays_within_its_bounds_whatever_is_observed(observed, static, miss):
    f = calibration.factor(static, observed, AUTO, missed=miss)
    assert AUTO.floor <= f.value <= AUTO.cap + calibration.GRANULARITY
    assert f.source in ("static", "learned", "miss")
    if f.source == "learned":
        assert f.observations >= AUTO.min_observations


@given(ratios, st.floats(0.5, 3.0), st.lists(st.floats(0.5, 3.0), min_size=1, max_size=5))
def test_a_counting_miss_never_lowers_the_factor(observed, static, misses):
    floor: float | None = None
    before = calibration.factor(static, observed, AUTO).value
    for used in misses:
        new = calibration.after_miss(used, floor)
        assert floor is None or new >= floor  # the record only goes up
        floor = new
        after = calibration.factor(static, observed, AUTO, missed=floor).value
        assert after >= before
        before = after


@given(
    st.lists(st.floats(0.5, 3.0), min_size=20, max_size=300),
    st.floats(0.5, 3.0),
    st.floats(0.0, 2.0),
    st.floats(0.0, 0.2),
)
def test_a_learned_factor_is_never_below_the_quantile_and_one_answer_cannot_carry_it(observed, wild, tail, headroom):
    settings = calibration.Settings(
        mode="auto", floor=0.5, cap=3.0, min_observations=20, window=1000, tail=tail, headroom=headroom
    )
    top = calibration.quantile(observed, settings.quantile)
    f = calibration.factor(1.25, observed, settings).value
    assert f >= min(settings.cap, top * (1 + headroom)) - 1e-9
    if len(observed) >= 100:  # how odd one answer is never matters: it counts as the highest honest one
        nudged = calibration.factor(1.25, observed + [wild], settings).value
        assert nudged == calibration.factor(1.25, observed + [min(wild, max(observed))], settings).value or wild < max(
            observed
        )


def test_too_few_answers_keep_the_static_factor_then_a_high_quantile_takes_over():
    few = calibration.factor(1.25, [1.0] * 4, AUTO)
    assert (few.value, few.source) == (1.25, "static")
    seen = [1.0 + i / 1000 for i in range(100)]  # 1.000 .. 1.099
    learned = calibration.factor(1.25, seen, AUTO)
    # the 99th percentile (1.098) plus half its gap above the 90th (1.089), rounded up
    assert learned.source == "learned" and learned.value == 1.11
    assert calibration.factor(1.25, seen, calibration.Settings()).source == "static"  # mode static
    assert (
        calibration.factor(1.25, seen, calibration.Settings(mode="auto")).value == 1.14
    )  # and the default 3% headroom
    assert calibration.factor(1.25, seen, AUTO, pin=1.4) == calibration.Factor(1.4, "pinned", 100)


def test_outliers_move_the_factor_by_one_sample_at_most():
    honest = [1.0] * 99
    assert calibration.factor(1.25, honest + [1e9], AUTO).value == 1.0  # one wild answer is clamped and outvoted
    assert calibration.factor(1.25, honest + [1e9] * 5, AUTO).value == 3.0  # a flood is still bounded by the cap


def _engine(mode: str, learned, **policy) -> Engine:
    deployments = {
        "claude": Deployment(
            "claude",
            "anthropic/claude-sonnet-4-5",
            {"max_input_tokens": 200_000, "max_output_tokens": 8192},
            "https://a",
        )
    }
    engine = Engine(
        PolicySet(defaults=Policy(calibration_mode=mode, calibration_min_observations=5, **policy)),
        deployments=deployments,
        model_map={},
    )
    engine.learned = learned
    return engine


def test_the_engine_counts_with_what_the_deployment_taught():
    body = {"model": "claude", "messages": [{"role": "user", "content": "hello there " * 400}], "max_tokens": 100}
    seen: list[str] = []

    def learned(key: str):
        seen.append(key)
        return [0.9] * 30, None

    static = _engine("static", learned).fit(body).report
    auto = _engine("auto", learned).fit(body).report
    assert (static.calibration_factor, static.calibration_source) == (1.25, "static")
    assert (auto.calibration_factor, auto.calibration_source) == (0.93, "learned")  # 0.9 + 3% headroom (no spread)
    assert seen and seen[0] == calibration.key("anthropic/claude-sonnet-4-5", "https://a")
    assert auto.calibration_key == seen[0]
    assert auto.input_tokens_before < static.input_tokens_before * 0.93 / 1.25 + 10
    pinned = _engine("auto", learned, calibration={"anthropic": 1.3}).fit(body).report
    assert (pinned.calibration_factor, pinned.calibration_source) == (1.3, "pinned")


def test_the_factor_announced_to_agents_is_the_one_counted_with_and_loads_no_tokenizer():
    """`Engine.count_factor` (what `/model/info` and `agent-env` scale an agent's window by) is the
    factor `counter_and_factor` counts with, for every source, without building a counter: a model
    list names models nobody has sent a request to yet."""
    loaded: list[str] = []

    def loader(name: str):
        loaded.append(name)
        from guard.core.encodings import get_vocab

        return get_vocab(name)

    def learned(key: str):
        return [0.9] * 30, None

    for mode, pins in (("static", {}), ("auto", {}), ("auto", {"anthropic": 1.3})):
        engine = _engine(mode, learned, calibration=pins)
        engine.counters = type(engine.counters)(loader)
        for model in ("claude", "gpt-4o", "mistral-large", "qwen2.5-coder", "llama-3-70b"):
            policy, key = engine.policy_for(model), engine.calibration_key(model)
            told = engine.count_factor(model, policy, key=key)
            assert not loaded
            assert told == engine.counter_and_factor(model, policy, key=key)[2]
            loaded.clear()


def test_exact_families_never_learn():
    engine = _engine("auto", lambda key: ([2.0] * 50, 3.0))
    engine.deployments["gpt"] = Deployment("gpt", "gpt-4o", {"max_input_tokens": 128_000, "max_output_tokens": 4096})
    report = engine.fit({"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}).report
    assert report.exact_count and report.calibration_factor == 1.0


def test_the_store_keeps_observations_in_process_without_redis():
    store = CalibrationStore(SummaryCache(CacheSettings()))

    async def run():
        for r in (1.1, 1.2, float("nan"), -1.0, 1e9):
            await store.observe("m|", r)
        return await store.miss("m|", 1.25)

    floor = asyncio.run(run())
    ratios, miss = store.lookup("m|")
    assert ratios == [1.1, 1.2, 20.0]  # nonsense dropped, wild values clamped to what is stored
    assert miss == floor == 1.25  # the factor that missed; the policy's step applies when counting


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs Debian's redis-server")
def test_two_stores_sharing_redis_converge_and_survive_its_death(tmp_path: Path):
    from tests.e2e.redis_server import Redis

    redis = Redis(tmp_path)
    redis.start()
    url = f"redis://127.0.0.1:{redis.port}/0"

    def store() -> CalibrationStore:
        return CalibrationStore(
            SummaryCache(CacheSettings(redis_url=url, redis_timeout_seconds=0.5, failure_threshold=2))
        )

    a, b = store(), store()

    async def run():
        for i in range(10):
            await a.observe("claude|x", 1.4 + i / 100)
            await b.observe("claude|x", 1.3)
        await b.miss("claude|x", 1.5)
        await a.observe("claude|x", 1.35)  # a reads back what b wrote, miss floor included
        redis.stop()
        await a.observe("claude|x", 1.0)  # Redis gone: kept in process, no error
        await a.miss("claude|x", 1.0)

    asyncio.run(run())
    ratios_a, miss_a = a.lookup("claude|x")
    assert len(ratios_a) == 22 and 1.3 in ratios_a and 1.49 in ratios_a
    assert miss_a == 1.5  # b's miss, never lowered by a's smaller one
    settings = calibration.Settings(mode="auto", min_observations=20, headroom=0.0, tail=0.0)
    assert calibration.factor(1.25, ratios_a, settings, missed=miss_a).value == pytest.approx(1.65)  # 1.5 x 1.1
    assert math.isclose(calibration.factor(1.25, ratios_a, settings).value, 1.49)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs Debian's redis-server")
def test_the_cli_shows_what_each_deployment_is_counted_with(tmp_path: Path, capsys):
    import json

    from guard.cli import main
    from tests.e2e.redis_server import Redis

    redis = Redis(tmp_path)
    redis.start()
    try:
        cfg = tmp_path / "config.yaml"
        cfg.write_text(
            "model_list:\n"
            "  - model_name: heavy\n    litellm_params: {model: openai/claude-heavy, api_base: 'http://h/v1'}\n"
            "    model_info: {max_input_tokens: 32768, max_output_tokens: 1024}\n"
            "  - model_name: gpt\n    litellm_params: {model: gpt-4o}\n"
            f"general_settings:\n  coordination_redis: {{host: 127.0.0.1, port: {redis.port}}}\n"
            "context_guard:\n  defaults: {calibration_mode: auto, calibration_min_observations: 5}\n"
        )
        store = CalibrationStore(SummaryCache(CacheSettings(redis_url=f"redis://127.0.0.1:{redis.port}/0")))

        async def feed():
            for i in range(8):
                await store.observe(calibration.key("openai/claude-heavy", "http://h/v1"), 1.8 + i / 100)

        asyncio.run(feed())
        assert main(["calibration", "--config", str(cfg), "--json"]) == 0
        rows = {r["deployment"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
        assert rows["heavy"]["source"] == "learned" and rows["heavy"]["factor"] == 1.93  # 1.87 + 3% headroom
        assert rows["heavy"]["observations"] == 8 and rows["heavy"]["ratio"]["p50"] == 1.83
        assert rows["gpt"]["source"] == "exact" and rows["gpt"]["factor"] == 1.0
    finally:
        redis.stop()


def test_the_provider_count_includes_cached_input_in_either_shape():
    from guard.state.telemetry import provider_input

    assert (
        provider_input({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 512}}) == 900
    )  # OpenAI: included
    assert (
        provider_input({"input_tokens": 40, "cache_read_input_tokens": 800, "cache_creation_input_tokens": 60}) == 900
    )  # Anthropic: parts
    assert provider_input({"prompt_tokens": True}) == 0 and provider_input(None) == 0


def test_a_pin_is_the_starting_factor_and_its_floor_never_a_ceiling():
    """Issue 25, item 3: the shipped config pins claude-* to 1.3; a deployment whose real counts
    are 1.45x the estimate was refused by its provider 166 times in 229 requests because the pin
    was never learned past, counting misses included."""
    under = [1.45] * 60
    # auto mode: what the provider answers raises a pinned factor above the pin...
    up = calibration.factor(1.25, under, AUTO, pin=1.3)
    assert up.source == "learned" and up.value >= 1.45
    # ...and never lowers it below
    down = calibration.factor(1.25, [0.8] * 60, AUTO, pin=1.3)
    assert (down.value, down.source) == (1.3, "pinned")
    # a counting miss raises it whatever the pin says, in static mode too
    missed = calibration.factor(1.25, [], calibration.Settings(), pin=1.3, missed=1.3)
    assert missed.source == "miss" and missed.value >= 1.43
    assert calibration.factor(1.25, [], calibration.Settings(), missed=1.25).value >= 1.37
    # a pin above the cap still holds
    assert calibration.factor(1.25, [], calibration.Settings(cap=1.2), pin=1.5).value == 1.5


def test_the_engine_reads_counting_misses_in_static_mode_and_learns_past_a_pin_in_auto():
    body = {"model": "claude", "messages": [{"role": "user", "content": "hello there " * 400}], "max_tokens": 100}
    static = _engine("static", lambda key: ([1.45] * 30, 1.3), calibration={"anthropic": 1.3}).fit(body).report
    assert static.calibration_source == "miss" and static.calibration_factor >= 1.43
    auto = _engine("auto", lambda key: ([1.45] * 30, None), calibration={"anthropic": 1.3}).fit(body).report
    assert auto.calibration_source == "learned" and auto.calibration_factor >= 1.45
