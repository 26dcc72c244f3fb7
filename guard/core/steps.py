"""The one registry of the guard's steps (the policy's `strategies`), least destructive first: each
step's name, how the planner runs it (`kind`), and whether it runs on every request over its room.
The policy validates and orders names with it, the planner dispatches on it, and
`guard.fit.strategies` binds a function to every step that rewrites the conversation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

StrategyName = Literal[
    "clamp_output",
    "compact_json",
    "drop_metadata",
    "dedupe",
    "truncate_tool_results",
    "summarize",
    "drop_oldest_turns",
    "truncate_recent_tool_results",
    "truncate_recent_call_arguments",
]
# budget: changes the reserved output, run by the planner before any rewriting; rewrite: a near-
# lossless rewrite of single messages, counted by estimate in round 1; lossy: cuts older history,
# measured on exact counts; summary: asks the driver for a summary (I/O); newest: cuts inside the
# newest turns, only as far as the room and only if nothing else could
Kind = Literal["budget", "rewrite", "lossy", "summary", "newest"]


@dataclass(frozen=True)
class Step:
    name: StrategyName
    kind: Kind
    # runs on every conversation over its room, past the stop mark: each message then has one form
    # turn after turn (a pure per-message rewrite)
    every_overflow: bool = False
    # cuts whole turns: a fit that needed it is cut again with it decided before the lossy steps
    # that shrink single results (the drop-first pass, guard.fit.rounds)
    whole_turns: bool = False
    # replaces a repeated result by a marker naming its first copy: restored where a later step
    # cut that copy
    marks_copies: bool = False


STEPS: tuple[Step, ...] = (
    Step("clamp_output", "budget"),
    Step("compact_json", "rewrite", every_overflow=True),
    Step("drop_metadata", "rewrite", every_overflow=True),
    Step("dedupe", "rewrite", marks_copies=True),
    Step("truncate_tool_results", "lossy"),
    Step("summarize", "summary"),
    Step("drop_oldest_turns", "lossy", whole_turns=True),
    Step("truncate_recent_tool_results", "newest"),
    Step("truncate_recent_call_arguments", "newest"),
)
STRATEGY_ORDER: tuple[StrategyName, ...] = tuple(s.name for s in STEPS)
BY_NAME: dict[str, Step] = {s.name: s for s in STEPS}
ORDER: dict[str, int] = {s.name: i for i, s in enumerate(STEPS)}


def of_kind(*kinds: Kind) -> frozenset[str]:
    """The names of the steps of these kinds."""
    return frozenset(s.name for s in STEPS if s.kind in kinds)


def _the(steps: list[Step]) -> StrategyName:
    assert len(steps) == 1, [s.name for s in steps]
    return steps[0].name


# the steps the planner treats apart, read from the registry: the output clamp, the summarizer, the
# step that cuts whole turns, the lossy steps that shrink single results, the one that marks copies
CLAMP = _the([s for s in STEPS if s.kind == "budget"])
SUMMARIZE = _the([s for s in STEPS if s.kind == "summary"])
WHOLE_TURNS = _the([s for s in STEPS if s.whole_turns])
SHRINKING = frozenset(s.name for s in STEPS if s.kind == "lossy" and not s.whole_turns)
MARKS_COPIES = _the([s for s in STEPS if s.marks_copies])


assert set(get_args(StrategyName)) == set(STRATEGY_ORDER), "every step name is in StrategyName and STEPS"
