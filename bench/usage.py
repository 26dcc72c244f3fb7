"""Counts against the provider's own: real requests whose provider reported the input tokens it
billed (bench/corpus/usage), counted by the guard and by `litellm.token_counter`.

    .venv/bin/python -m bench.usage

Per corpus file (one agent family, model and domain), the ratio of each count to the provider's:
min, median and max, and the share of requests under-counted (a count under the provider's lets a
request through that the provider refuses; one over it cuts history that would have fit). A
logged conversation's requests billed more than a later request of it, which holds every message
of theirs, go on a row of their own (`BILLED_OVER_LATER`: the log misses what was sent). Recorded
requests with images have rows by route and image formula (`image_requests`)."""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from guard.core.policy import load_policy_set  # noqa: E402
from guard.fit.engine import Engine  # noqa: E402

CORPUS = Path(__file__).parent / "corpus" / "usage"
# a session whose tool schemas were not logged (Codex, Claude Code): each counter's difference from
# the provider's count on its first request (the tools' share) is added to its every count of it
UNLOGGED_TOOLS = "tools as on its first request"
# a request whose response ran the provider's web search: the results it read are billed as input
# of that request (and are in the context after it), none of them in the request
SEARCHED = "its response searched the web"
# a request billed more than a later request of its conversation, which holds every message of it
# and more: what was sent is not all in the log (tau2 telecom: 4 of 164, 201-292 tokens, each on a
# turn where the simulated customer used its phone's tools), so no counter can match it from the log
BILLED_OVER_LATER = "billed over a later request holding all of it"


def requests() -> list[tuple[str, dict[str, Any], int]]:
    """(corpus name, request body, the provider's input tokens) of every logged request: an agent's
    simulations (tau2: one system prompt and tool list, requests as message counts), recorded
    requests each whole (the Anthropic cassettes: a row per family of models, with and without
    tools) or an agent session's (Codex: its items; Claude Code and pi: their loops in
    bench/corpus/agents; requests as item or message counts; Codex's and Claude Code's tool schemas
    not logged: see `UNLOGGED_TOOLS`; pi's rebuilt, `tools_rebuilt`)."""
    out = []
    for path in sorted(CORPUS.glob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        corpus = path.name.removesuffix(".json.gz")
        if "loop" in data:  # an agent session: its loop's messages (Claude Code's tools unlogged)
            with gzip.open(CORPUS.parent / "agents" / f"{data['loop']}.json.gz", "rt", encoding="utf-8") as f:
                loop = json.load(f)
            label = corpus if data.get("tools_rebuilt") else f"{corpus}, {UNLOGGED_TOOLS}"
            for end, billed in data["usage"]:
                out.append((label, {**loop, "messages": loop["messages"][:end]}, billed))
            continue
        if "items" in data:
            for end, billed, _, searched in data["usage"]:
                body = {"model": data["model"], "instructions": data["instructions"], "input": data["items"][:end]}
                label = f"{corpus}, {UNLOGGED_TOOLS}" + (f", {SEARCHED}" if searched else "")
                out.append((label, body, billed))
            continue
        if "image_requests" in data:  # (their own rows: `image_requests`)
            continue
        if "requests" in data:  # (a request's own row where it names one, else a row per family)
            for r in data["requests"]:
                body = r["body"]
                name = r.get("row") or f"{family(body)}, {'tools' if body.get('tools') else 'no tools'}"
                out.append((name, body, r["billed"]))
            continue
        system = {"role": "system", "content": data["system"]}
        for sim in data["simulations"]:
            over = billed_over_later([billed for _, billed in sim["usage"]])
            for (end, billed), odd in zip(sim["usage"], over):
                body = {"model": data["model"], "messages": [system, *sim["messages"][:end]], "tools": data["tools"]}
                out.append((f"{corpus}, {BILLED_OVER_LATER}" if odd else corpus, body, billed))
    return out


def image_requests(engine: Engine | None = None) -> list[tuple[str, dict[str, Any], int, int]]:
    """(row name, request, the provider's input tokens, the guard's count) of every recorded request
    with images (bench/corpus/usage/image_cassettes.json.gz), each image a blank PNG of its recorded
    size (the formulas read sizes, not pixels). A Gemini request is its images alone: the tokens
    billed for them against the guard's (its `request` the chat parts LiteLLM would turn into
    Gemini's). A row is a route and the image formula its model counts with."""
    from guard.core.images import image_part_tokens
    from guard.core.models import profile

    with gzip.open(CORPUS / "image_cassettes.json.gz", "rt", encoding="utf-8") as f:
        recorded = json.load(f)["image_requests"]
    engine = engine or Engine(load_policy_set({}))
    out = []
    for r in recorded:
        model = r["model"].split(" ")[0].removeprefix("us.").removeprefix("anthropic.")
        formula = profile(model).image_formula
        name = f"images: {r['provider']}, {formula}"
        if r["provider"] == "gemini":
            parts = [
                {"type": "image_url", "image_url": {"url": _drawn_url(*i["size"]), "detail": i["detail"]}}
                for i in r["images"]
            ]
            ours = sum(image_part_tokens(p, formula) for p in parts)
            out.append(
                (name, {"model": model, "messages": [{"role": "user", "content": parts}]}, r["billed_images"], ours)
            )
            continue
        body = json.loads(_BLANK.sub(lambda m: _drawn(int(m[1]), int(m[2])), json.dumps(r["body"], ensure_ascii=False)))
        body["model"] = model
        out.append((name, body, r["billed"], guard_count(engine, body, exact_model=True)))
    return out


_BLANK = re.compile("\u27e8blank (\\d+)x(\\d+)\u27e9")


@functools.lru_cache(maxsize=None)
def _drawn(width: int, height: int) -> str:
    from bench.traces import blank_png

    return blank_png(width, height)


def _drawn_url(width: int, height: int) -> str:
    return "data:image/png;base64," + _drawn(width, height)


def billed_over_later(bills: list[int]) -> list[bool]:
    """Of a conversation's requests in order (each holding every message of the one before), which
    were billed more than a later one: `BILLED_OVER_LATER`."""
    out, least = [], math.inf
    for billed in reversed(bills):
        out.append(billed > least)
        least = min(least, billed)
    return out[::-1]


def family(body: dict[str, Any]) -> str:
    """A recorded request's family as the bench groups them: Claude 3 and 3.5+ (older Claude 3
    models bill another tool prompt: 159-530 tokens), OpenAI Responses API requests by model
    generation (reasoning models frame a request their own way)."""
    model = body["model"]
    if "input" in body:
        return "responses, " + ("gpt-5 / o-series" if model.startswith(("gpt-5", "o3", "o4")) else "gpt-4o / gpt-4.1")
    return "claude 3" if model.startswith(("claude-3-haiku", "claude-3-opus", "claude-3-sonnet")) else "claude 3.5+"


def guard_count(engine: Engine, body: dict[str, Any], exact_model: bool = False) -> int:
    # (a model the cost map does not know counts as one of its family: every Claude model is
    # counted alike, with the family's estimate; `exact_model`: as itself, for its image formula)
    claude = body["model"].startswith("claude")
    model = "claude-sonnet-4-5" if claude and not exact_model else body["model"]
    counter, _ = engine.counter_for(model, engine.policy_for(model))
    from guard.dialects import ANTHROPIC, detect

    # (the recordings are Anthropic messages bodies: a plain one reads as chat to the detector)
    return counter.body(ANTHROPIC if claude else detect(body), body)


def main() -> None:
    import litellm

    engine = Engine(load_policy_set({}))
    rows: dict[str, list[tuple[float, float]]] = {}
    tools: dict[tuple[str, str], int] = {}  # a session's tools' share (UNLOGGED_TOOLS), by its first request
    for name, body, billed in requests():
        ours = guard_count(engine, body)
        theirs = _litellm_count(litellm, body)
        if UNLOGGED_TOOLS in name:  # each counter's own difference on the session's first request
            session = name.split(",")[0]
            ours += tools.setdefault((session, "guard"), billed - ours)
            if theirs is not None:
                theirs += tools.setdefault((session, "litellm"), billed - theirs)
        rows.setdefault(name, []).append((ours / billed, None if theirs is None else theirs / billed))
    for name, body, billed, ours in image_requests(engine):
        theirs = None if "gemini" in name else _litellm_count(litellm, body)
        rows.setdefault(name, []).append((ours / billed, None if theirs is None else theirs / billed))
    print("| requests | count | ratio to the provider's: min | median | max | under-counted | by over 3% |")
    print("|---|---|---|---|---|---|---|")
    for name, pairs in rows.items():
        for label, i in (("guard", 0), ("litellm.token_counter", 1)):
            values = [v for p in pairs if (v := p[i]) is not None]
            if not values:
                continue
            under = sum(v < 1.0 for v in values) / len(values)
            far = sum(v < 0.97 for v in values) / len(values)
            print(
                f"| {name} ({len(values)}) | {label} | {min(values):.3f} | {statistics.median(values):.3f} | "
                f"{max(values):.3f} | {under:.0%} | {far:.0%} |"
            )


def _litellm_count(litellm: Any, body: dict[str, Any]) -> int | None:
    """`litellm.token_counter` on the body (an Anthropic body's system prompt as a first message);
    None where it raises (a content block it does not know) or the body is not chat-shaped."""
    if "input" in body:  # (a Responses API body: token_counter takes chat messages)
        return None
    messages = list(body["messages"])
    if body.get("system"):
        messages = [{"role": "system", "content": body["system"]}, *messages]
    try:
        return int(litellm.token_counter(model=body["model"], messages=messages, tools=body.get("tools")))
    except Exception:  # noqa: BLE001  (the yardstick's own limits are not the guard's)
        return None


if __name__ == "__main__":
    main()
