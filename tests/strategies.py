"""Hypothesis strategies: generated conversations in every dialect, and guard settings to fit them.

Every generated message carries an `x_id` (its original position) so tests can follow messages
through the guard; every text carries canary words so tests can prove the report holds no text.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

WORDS = (
    "the of and to in is for on with as by this that from config retry timeout pool client server "
    "request response token window model cache error value list item key path file line test pass "
    "fail import module class def return yield async await lambda über naïve 東京 数据 данные ✓"
).split()
CANARY = "zqxcanary"  # never a substring of WORDS, so its presence in a report means text leaked


def _words(n: int, seed: int) -> str:
    """n words of WORDS picked by a small LCG from seed, then the canary."""
    picked = []
    for _ in range(n):
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        picked.append(WORDS[(seed >> 8) % len(WORDS)])
    return " ".join(picked) + f" {CANARY}"


def _text(min_words: int = 0, max_words: int = 40) -> st.SearchStrategy[str]:
    # two draws per text (its length and a seed) rather than one per word: generating the data
    # was most of the property tests' time; shrinking still shortens texts and simplifies seeds
    return st.builds(_words, st.integers(min_words, max_words), st.integers(0, 2**16))


huge_text = st.integers(600, 3000).map(lambda n: " ".join(WORDS[i % len(WORDS)] for i in range(n)) + f" {CANARY}")

json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | _text(0, 12),
    lambda children: (
        st.lists(children, max_size=6)
        | st.dictionaries(
            st.sampled_from(["id", "title", "url", "text", "metadata", "embedding", "items", "score"]),
            children,
            max_size=5,
        )
    ),
    max_leaves=40,
)


@st.composite
def tool_output(draw: st.DrawFn) -> Any:
    """A tool result's content: pretty or compact JSON, plain text, a huge text, empty, or parts."""
    kind = draw(
        st.sampled_from(["json_pretty", "json_compact", "text", "huge", "empty", "parts", "articles", "screenshot"])
    )
    if kind == "json_pretty":
        return json.dumps(draw(json_value), indent=2)
    if kind == "json_compact":
        return json.dumps(draw(json_value), separators=(",", ":"))
    if kind == "huge":
        return draw(huge_text)
    if kind == "empty":
        return ""
    if kind == "parts":
        return [{"type": "text", "text": draw(_text(1, 30))} for _ in range(draw(st.integers(1, 3)))]
    if kind == "screenshot":  # a computer-use agent's result: an image, alone or after a line of text
        shot = {"type": "image_url", "image_url": {"url": f"https://x.invalid/{draw(st.integers(0, 3))}.png"}}
        return [{"type": "text", "text": draw(_text(1, 8))}, shot] if draw(st.booleans()) else [shot]
    if kind == "articles":
        n = draw(st.integers(1, 8))
        docs = [
            {
                "id": i,
                "title": draw(_text(1, 5)),
                "url": f"https://x.invalid/{i}",
                "text": draw(_text(5, 60)),
                "metadata": {"source": "s", "embedding": [0.25] * draw(st.integers(0, 30))},
            }
            for i in range(n)
        ]
        return json.dumps({"results": docs}, indent=draw(st.sampled_from([None, 2])))
    return draw(_text(1, 80))


@st.composite
def call_arguments(draw: st.DrawFn) -> dict[str, Any]:
    """A tool call's arguments: mostly a short query; one call in eight writes a file or page
    whose whole text is in its arguments (an agent's `write_file`), up to a huge one."""
    if draw(st.integers(0, 7)):
        return {"q": draw(_text(0, 4))}
    return {"path": "/out/page.html", "content": draw(_text(20, 200) | huge_text), "overwrite": draw(st.booleans())}


@st.composite
def openai_conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        msgs.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(_text(1, 30))})
    msgs.append(
        {
            "role": "user",
            "content": draw(_text(1, 40) | huge_text) if draw(st.integers(0, 9)) == 0 else draw(_text(1, 40)),
        }
    )
    call = 0
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["tools", "tools", "tools", "assistant", "user"]))
        if kind == "assistant":
            msgs.append({"role": "assistant", "content": draw(_text(1, 40))})
        elif kind == "user":
            msgs.append({"role": "user", "content": draw(_text(1, 40))})
        else:
            n = draw(st.integers(1, 3))
            calls = []
            for _ in range(n):
                calls.append(
                    {
                        "id": f"call_{call}",
                        "type": "function",
                        "function": {
                            "name": draw(st.sampled_from(["search", "read_file", "grep"])),
                            "arguments": json.dumps(draw(call_arguments())),
                        },
                    }
                )
                call += 1
            msgs.append({"role": "assistant", "content": draw(st.none() | _text(0, 10)), "tool_calls": calls})
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": draw(tool_output())})
    if draw(st.booleans()):
        msgs.append({"role": "user", "content": draw(_text(1, 30))})
    for i, m in enumerate(msgs):
        m["x_id"] = i
    return msgs


def _anthropic_parts(content: Any) -> Any:
    """Chat parts as Anthropic blocks (an `image_url` part becomes an `image` block by URL)."""
    if not isinstance(content, list):
        return content
    return [
        {"type": "image", "source": {"type": "url", "url": p["image_url"]["url"]}}
        if p.get("type") == "image_url"
        else p
        for p in content
    ]


def to_anthropic(msgs: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The same conversation as Anthropic blocks; x_id kept on every message."""
    system = "\n".join(m["content"] for m in msgs if m["role"] in ("system", "developer")) or None
    out: list[dict[str, Any]] = []
    for m in msgs:
        if m["role"] in ("system", "developer"):
            continue
        if m["role"] == "tool":
            content = _anthropic_parts(m["content"])
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": content}
            if out and out[-1]["role"] == "user" and out[-1].get("_results"):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "_results": True, "x_id": m["x_id"]})
            continue
        if m["role"] == "assistant" and m.get("tool_calls"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            blocks += [
                {
                    "type": "tool_use",
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "input": json.loads(c["function"]["arguments"]),
                }
                for c in m["tool_calls"]
            ]
            out.append({"role": "assistant", "content": blocks, "x_id": m["x_id"]})
        else:
            out.append({"role": m["role"], "content": m["content"], "x_id": m["x_id"]})
    for m in out:
        m.pop("_results", None)
    return system, out


def _responses_parts(content: Any, kind: str) -> Any:
    if isinstance(content, list):
        return [
            {**p, "type": kind}
            if p.get("type") == "text"
            else {"type": "input_image", "image_url": p["image_url"]["url"]}
            if p.get("type") == "image_url"
            else p
            for p in content
        ]
    return content


def to_responses(msgs: list[dict[str, Any]], instructions: bool = False) -> tuple[str | None, list[dict[str, Any]]]:
    """The same conversation as Responses API items: messages (string or `input_text` /
    `output_text` parts), a `reasoning` item with encrypted content before each batch of calls,
    `function_call` and `function_call_output` items; every item gets its own x_id. With
    `instructions`, the system messages become the body's `instructions`."""
    system = "\n".join(m["content"] for m in msgs if m["role"] in ("system", "developer")) or None
    out: list[dict[str, Any]] = []
    for m in msgs:
        role = m["role"]
        if role in ("system", "developer"):
            if not instructions:
                out.append({"role": role, "content": m["content"]})
        elif role == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": _responses_parts(m["content"], "input_text"),
                }
            )
        elif role == "assistant" and m.get("tool_calls"):
            if m["x_id"] % 2 == 0:
                out.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{m['x_id']}",
                        "encrypted_content": "gAAAAB" + "x" * (8 * m["x_id"] + 8),
                        "summary": [{"type": "summary_text", "text": m.get("content") or ""}],
                    }
                )
            elif m.get("content"):
                out.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": m["content"], "annotations": []}],
                    }
                )
            out += [
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                }
                for c in m["tool_calls"]
            ]
        elif role == "assistant":
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": m["content"], "annotations": []}],
                }
            )
        elif m["x_id"] % 3 == 0:
            out.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": m["content"]}]})
        else:
            out.append({"role": "user", "content": m["content"]})
    for i, item in enumerate(out):
        item["x_id"] = i
    return (system if instructions else None), out


@st.composite
def request_body(
    draw: st.DrawFn, dialects: tuple[str, ...] = ("openai", "anthropic")
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(body, settings): a body in one of `dialects` and the limits/policy to fit it into."""
    msgs = draw(openai_conversation())
    dialect = draw(st.sampled_from(dialects))
    if dialect == "responses":
        instructions, items = to_responses(msgs, draw(st.booleans()))
        body = {"model": "tiny", "input": items}
        if instructions is not None:
            body["instructions"] = instructions
        if draw(st.booleans()):
            body["max_output_tokens"] = draw(st.integers(1, 2000))
        if draw(st.integers(0, 3)) == 0:
            body["tools"] = [{"type": "function", "name": "search", "parameters": {"type": "object"}}]
    elif dialect == "anthropic":
        system, converted = to_anthropic(msgs)
        body: dict[str, Any] = {"model": "tiny", "messages": converted}
        if system is not None:
            body["system"] = system
    else:
        body = {"model": "tiny", "messages": msgs}
    if dialect != "responses" and draw(st.booleans()):
        body["max_tokens"] = draw(st.integers(1, 2000))
    if dialect != "responses" and draw(st.integers(0, 3)) == 0:
        body["tools"] = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    settings = {
        "window": draw(st.integers(300, 8000)),
        "max_output": draw(st.integers(16, 1024)),
        "low_water_ratio": draw(st.sampled_from([0.5, 0.8, 0.9, 1.0])),
        "keep_recent_groups": draw(st.integers(0, 4)),
        "min_output_tokens": draw(st.none() | st.integers(1, 64)),
        "safety_margin_tokens": draw(st.integers(0, 64)),
        "dialect": dialect,
    }
    return body, settings


FACT_NAMES = ("zephyr", "quasar", "obsidian", "tundra", "marigold")
FACT_VALUE = "Q7{t}1-55{t}0"


@st.composite
def long_agent_loop(  # noqa: PLR0913 - a strategy's keyword flags, one per shape of loop
    draw: st.DrawFn,
    dialects: tuple[str, ...] = ("openai", "anthropic", "responses"),
    questions: bool = False,
    giant: bool = False,
    large: bool = False,
    screenshots: bool = False,
    environment: bool = False,
    observed_as_replies: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(body, settings): one task, then 20-40 tool turns whose results (plain text or JSON, 60-400
    words) are too many for truncation alone: squeezed to a fifth to a half of its size, the loop
    has whole turns dropped on most turns. Turn sizes vary, so crossings fall anywhere. With
    `questions`, facts planted in the first results are asked about by the user in the second
    half of the loop (after a reply of the model's), where the cuts have removed them. With
    `giant`, one or two results are as large as all the others together: larger than the room;
    with `large`, a quarter to 0.6 of them: most of the room, or a little over it. With
    `screenshots`, every third result is a screenshot (an image, alone or after a line of text), as
    a computer-use agent's are. With `environment`, each result is followed by a user message of the
    client's own in the same request (the state of its environment, as Roo Code sends it). With
    `observed_as_replies` (OpenAI chat), each step is the model's action as text and the result as
    a second assistant message, CrewAI's ReAct loop: its requests end with that result."""
    turns = draw(st.integers(20, 40))
    sizes = draw(st.lists(st.integers(60, 400), min_size=turns, max_size=turns))
    if giant or large:
        total = round(sum(sizes) * (draw(st.floats(0.25, 0.6)) if large else 1.0))
        for t in draw(st.lists(st.integers(1, turns - 3), min_size=1, max_size=2, unique=True)):
            sizes[t] = total
    facts = draw(st.lists(st.sampled_from(FACT_NAMES), min_size=1, max_size=3, unique=True)) if questions else []
    asked_at = {draw(st.integers(turns // 2, turns - 1)): name for name in facts}
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " + CANARY, "x_id": 0},
        {"role": "user", "content": "Fix the failing import in the config loader. " + CANARY, "x_id": 1},
    ]
    for t, n in enumerate(sizes):
        words = " ".join(WORDS[(t * 7 + i) % len(WORDS)] for i in range(n))
        out = (
            json.dumps({"lines": words.split(" ")[: n // 4], "path": f"f{t}.py"}, indent=2)
            if t % 3 == 0
            else f"{words} {CANARY}"
        )
        if t < len(facts):
            out += f"\nthe rollout key of the {facts[t]} cluster is {FACT_VALUE.format(t=t)}\n"
        result: Any = out
        if screenshots and t % 3 == 1 and t >= len(facts):
            shot = {"type": "image_url", "image_url": {"url": f"https://x.invalid/{t}.png"}}
            result = [{"type": "text", "text": f"clicked {t}"}, shot] if t % 2 else [shot]
        if t in asked_at:
            msgs.append({"role": "assistant", "content": "Done with that step.", "x_id": len(msgs)})
            question = f"What is the rollout key of the {asked_at[t]} cluster?"
            msgs.append({"role": "user", "content": question, "x_id": len(msgs)})
        if observed_as_replies:
            action = f'Thought: {draw(_text(0, 12))}\nAction: bash\nAction Input: {{"cmd": "step {t}"}}'
            msgs.append({"role": "assistant", "content": action, "x_id": len(msgs)})
            msgs.append({"role": "assistant", "content": f"Observation: {out}", "x_id": len(msgs)})
            continue
        call = {
            "id": f"c{t}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"cmd": f"step {t}"})},
        }
        msgs.append({"role": "assistant", "content": draw(_text(0, 12)), "tool_calls": [call], "x_id": len(msgs)})
        msgs.append({"role": "tool", "tool_call_id": f"c{t}", "content": result, "x_id": len(msgs)})
        if environment:
            state = f"<environment_details> step {t}: open tabs f{t}.py f{t + 1}.py " + "visible " * draw(
                st.integers(5, 60)
            )
            msgs.append({"role": "user", "content": state, "x_id": len(msgs)})
    dialect = draw(st.sampled_from(dialects))
    if dialect == "responses":
        instructions, items = to_responses(msgs, draw(st.booleans()))
        body: dict[str, Any] = {"model": "tiny", "input": items, "max_output_tokens": 256}
        if instructions is not None:
            body["instructions"] = instructions
    elif dialect == "anthropic":
        system, converted = to_anthropic(msgs)
        body = {"model": "tiny", "messages": converted, "max_tokens": 256}
        if system is not None:
            body["system"] = system
    else:
        body = {"model": "tiny", "messages": msgs, "max_tokens": 256}
    settings = {
        "share": draw(st.floats(0.2, 0.5)),  # of the whole loop's size: the window is set by the test
        "max_output": 256,
        "low_water_ratio": 1.0,
        "keep_recent_groups": draw(st.integers(1, 3)),
        "min_output_tokens": None,
        "safety_margin_tokens": 0,
        "relevance": draw(st.sampled_from(["bm25", "off"])),
        "dialect": dialect,
    }
    return body, settings
