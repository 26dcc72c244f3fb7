"""A carried cut across a change of the deployment's calibration factor (`guard.fit.factor_change`):
with `calibration_mode: auto` the factor moves whenever the providers' answers move the learned
quantile, and every count moves with it. The cut is made again with the factor it was counted
with and goes byte for byte while it fits the room counted with today's; when it no longer does,
a new cut is made with today's factor."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.cache import LAST_RESORT, loops, requests, window_policy
from guard.core.errors import ContextWindowExceeded
from guard.core.policy import PolicySet
from guard.dialects import by_name, detect
from guard.fit.engine import Engine, Sources
from tests.strategies import long_agent_loop
from tests.test_carry_while_fits import _engine as carry_engine
from tests.test_properties import _growing

LOOP = "swe/django__django-11848/anthropic"


def _engine(ratio: list[float]) -> tuple[Engine, dict[str, Any]]:
    """An engine for the loop at half its size whose deployment's providers answered `ratio[0]`
    (read at each request), and the loop."""
    body = dict(loops(match=LOOP))[LOOP]
    policy = window_policy(body, 0.5, calibration_mode="auto")
    engine = Engine(PolicySet(defaults=policy), sources=Sources(learned=lambda key: ([ratio[0]] * 25, None)))
    return engine, body


def _fitted(engine: Engine, body: dict[str, Any]) -> Iterator[tuple[dict[str, Any], Any]]:
    """Each request of the loop and its fit (the ones refused left out)."""
    for turn in requests(body):
        try:
            yield turn, engine.fit(turn)
        except ContextWindowExceeded:
            continue


def _messages(body: dict[str, Any]) -> str:
    return json.dumps(detect(body).messages(body))


def test_a_carried_cut_goes_byte_for_byte_after_the_factor_changes_while_it_fits():
    """The turn after the factor fell (providers' ratios 1.27 -> 1.20) carries the cut the turn
    before sent, counted as it was made, where it is over the room; its report counts what goes
    with today's factor."""
    ratio = [1.27]
    engine, body = _engine(ratio)
    previous, asked, checked = None, None, 0
    for turn, fitted in _fitted(engine, body):
        report = fitted.report
        if ratio[0] == 1.20 and report.changed and _carried_fits(engine, (asked, previous), turn):
            # (the turn just after the factor fell, over the room, the previous turn's cut fitting)
            sent, before = _messages(fitted.body), _messages(previous.body)
            assert sent[: len(before) - 1] == before[:-1], (report.cut, previous.report.cut)
            assert report.cut == previous.report.cut
            model = turn["model"]
            _, _, factor = engine.counter_and_factor(
                model, engine.policy_for(model), None, engine.calibration_key(model)
            )
            assert report.calibration_factor == factor.value < previous.report.calibration_factor
            assert report.input_tokens_after == engine.count(fitted.body) <= report.room
            assert report.carried is not None and report.carried["factor"] == previous.report.calibration_factor
            checked += 1
        ratio[0] = 1.20 if ratio[0] == 1.27 and report.cut is not None else 1.27
        previous, asked = fitted, turn
    assert checked >= 10


def _carried_fits(engine: Engine, previous: tuple[dict[str, Any], Any], turn: dict[str, Any]) -> bool:
    """Whether the previous turn's prompt plus the messages added since fits the room counted with
    today's factor (the messages added go as sent: this loop's are short, no JSON to compact)."""
    d = detect(turn)
    asked, fitted = previous
    added = d.messages(turn)[len(d.messages(asked)) :]
    return engine.count(d.with_messages(fitted.body, [*d.messages(fitted.body), *added])) <= fitted.report.room


def test_a_cut_that_no_longer_fits_after_the_factor_rose_is_made_anew_with_todays():
    """A factor far higher than the one the carried cut was counted with: the cut no longer fits
    the room counted with it, and a new one is made with today's factor, within the room."""
    ratio = [1.20]
    engine, body = _engine(ratio)
    jumped = 0
    for _, fitted in _fitted(engine, body):
        report = fitted.report
        if ratio[0] == 1.9:
            assert report.calibration_factor > 1.9 and report.input_tokens_after == engine.count(fitted.body)
            assert report.input_tokens_after <= report.room
            assert report.carried is None or report.carried["factor"] == report.calibration_factor
            jumped += report.cut is not None
            break
        if report.cut is not None:
            ratio[0] = 1.9
    assert jumped == 1


def test_records_of_a_cut_keep_the_factor_it_was_counted_with():
    """The conversation's record and anchor round-trip the factor (0: recorded before it was)."""
    from guard.fit.edited import LastCut
    from guard.fit.temperature import Anchor

    anchor = Anchor(3, 900, 1200, 1500, 1.26)
    assert Anchor.from_dict(anchor.to_dict()) == anchor
    assert Anchor.from_dict({"length": 3, "mark": 900, "prefix_tokens": 1200}) == Anchor(3, 900, 1200)
    last = LastCut(4, 800, 1000, 6, "d", "s", room=1500, factor=0.93)
    assert LastCut.from_dict(json.loads(json.dumps(last.to_dict()))) == last
    old = {k: v for k, v in last.to_dict().items() if k != "factor"}
    assert LastCut.from_dict(old) == LastCut(4, 800, 1000, 6, "d", "s", room=1500)
    for bad in ("1.2", True, -1.0, float("inf"), None):
        assert LastCut.from_dict({**last.to_dict(), "factor": bad}) is None
        assert Anchor.from_dict({**anchor.to_dict(), "factor": bad}) is None


EXAMPLES = {"ci": 40, "dev": 20}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 1000)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    long_agent_loop(dialects=("anthropic",)),
    st.lists(st.sampled_from([1.05, 1.12, 1.2, 1.27, 1.35, 1.45]), min_size=2, max_size=4, unique=True),
    st.integers(1, 4),
)
def test_a_carried_cut_is_kept_while_it_fits_whatever_factor_the_deployment_learns(case, ratios, every):
    """Issue 34's property on a deployment whose learned factor changes during the loop (its
    providers' ratios `ratios` in turn, each for `every` turns): a turn whose previous prompt plus
    the messages added since fits the room, counted with today's factor, starts with that prompt
    byte for byte (the cut is made again with the factor it was counted with); a turn that fits whole goes unchanged
    (invariant 2); and no turn goes over the room counted with today's factor."""
    body, drawn = case
    ratio = [ratios[0]]
    probe = _tiny(10**7, drawn, ratio)
    window = int(probe.fit(body, dialect="anthropic").report.input_tokens_before * drawn["share"]) + drawn["max_output"]
    engine = _tiny(window, drawn, ratio)
    d = by_name("anthropic")
    previous: tuple[dict[str, Any], Any] | None = None
    for t, turn in enumerate(_growing(body)):
        ratio[0] = ratios[t // every % len(ratios)]
        try:
            fitted = engine.fit(turn, dialect="anthropic")
        except ContextWindowExceeded:
            previous = None
            continue
        report = fitted.report
        today, _, _ = engine.counter_and_factor("tiny", engine.policy_for("tiny"), None, engine.calibration_key("tiny"))
        assert report.calibration_factor == today.factor and today.body(d, fitted.body) <= report.room
        if previous is not None and previous[1].report.cut is not None and report.outcome != "unchanged":
            asked, sent = previous
            added = d.messages(turn)[len(d.messages(asked)) :]
            carried = d.with_messages(sent.body, [*d.messages(sent.body), *added])
            if today.body(d, carried) <= report.room and not _last_resort(drawn, sent):
                before = json.dumps(d.messages(sent.body))
                assert json.dumps(d.messages(fitted.body)).startswith(before[:-1]), (t, ratios, every)
        previous = (turn, fitted)


def _tiny(window: int, drawn: dict[str, Any], ratio: list[float]) -> Engine:
    """The property tests' engine (`tests.test_carry_while_fits`, its model a Claude one) with
    `calibration_mode: auto`, its providers' answers `ratio[0]` (read at each request)."""
    learned = Sources(learned=lambda key: ([ratio[0]] * 25, None))
    return carry_engine("anthropic", window, drawn, sources=learned, calibration_mode="auto")


def _last_resort(drawn: dict[str, Any], sent: Any) -> bool:
    """Whether `sent` was cut inside its newest turns under `last_resort_cuts: recut` (not carried)."""
    return drawn.get("last_resort_cuts") == "recut" and any(a.kind in LAST_RESORT for a in sent.report.actions)


def test_the_benches_replay_a_loop_whose_learned_factor_changes():
    """`--factors 0.90,0.97:4` (bench.sweep, bench.replicas): the providers' ratios are 0.90 for 4
    turns, then 0.97 for 4, in turn, read by the engine at each request."""
    from bench.cache import learning
    from bench.replicas import _task

    *_, body = _task((LOOP, 0.5, False, None, None, "", None, "0.90,0.97:4"))
    assert body["x_factors"] == ((0.90, 0.97), 4)
    engine, turn = Engine(), [0]
    learning(engine, body, turn)
    taught = []
    for t in range(9):
        turn[0] = t
        ratios, missed = engine.learned("any")
        taught.append(ratios[0])
        assert len(ratios) == 25 and missed is None
    assert taught == [0.90] * 4 + [0.97] * 4 + [0.90]
