"""Compaction without I/O: what a summary call is asked, how a span is cut into calls that fit
the summarizer's window, and whether an answer is usable.

The shell (`guard.shell.summarizer`) makes the calls; everything it decides is decided here, so it can
be tested without a model:

- `transcript(dialect, messages)` flattens a span to plain text lines, one per message (tool calls
  and results become text too: a small summarizer model's chat template may drop tool turns, and a
  flat transcript can never break a provider's tool pairing rules);
- `chunks(lines, counts, room)` packs lines into calls that each fit the summarizer's room
  (map-reduce when the span is larger than one call), shortening a line that alone is too big;
- `span_key(...)` is the cache key: tenant + summarizer model + prompt version + the span's digest
  (`span_digest`), so a summary never crosses tenants and a changed prompt never reuses an old answer;
- `check(answer, count, max_tokens)` says why an answer cannot be used (empty, oversized).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from guard.core import jsontext
from guard.core.memo import Memo, current
from guard.dialects import Dialect

PROMPT_VERSION = "2"  # part of every cache key: bump it when the prompts change

SYSTEM_PROMPT = (
    "You compact the earlier part of a conversation between a user, an AI agent and its tools, so "
    "that the agent can carry on without it. Write a dense plain-text summary. Keep, verbatim where "
    "possible: the user's task and constraints; decisions taken and why; file paths, URLs, "
    "identifiers, names, numbers and commands; error messages; what was tried and what came of it; "
    "open items and next steps. Leave out greetings, repetition and raw data that was already used. "
    "Do not invent anything and do not address anyone. At most {words} words."
)
MERGE_PROMPT = (
    "You merge partial summaries of consecutive parts of one conversation into a single summary, in "
    "order. Keep every task, decision, path, identifier, number, error and open item they mention. "
    "Do not invent anything. At most {words} words."
)
TRANSCRIPT_HEADER = "Conversation to summarize:\n"
PARTS_HEADER = "Partial summaries, oldest first:\n"


def words_for(max_tokens: int) -> int:
    """A word limit the model can follow that stays inside its token budget (~1.3 tokens/word)."""
    return max(16, int(max_tokens * 0.6))


def system_prompt(max_tokens: int, *, merge: bool = False) -> str:
    return (MERGE_PROMPT if merge else SYSTEM_PROMPT).format(words=words_for(max_tokens))


# -- transcript -------------------------------------------------------------------------------


def transcript(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """One plain-text line (possibly multi-line) per message, in order.

    Lines of plain-text messages are memoised by their content: an agent loop resends the same
    messages every turn, and handing back the same line object lets every memo keyed by a line
    (span hashes, relevance) find it without hashing its text again."""
    out = []
    lines = current().transcript_lines
    for msg in messages:
        content = msg.get("content") if type(msg) is dict else None
        if type(content) is not str or msg.get("tool_calls"):
            out.append(_line(dialect, msg))
            continue
        key = (dialect.name, msg.get("role"), msg.get("name"), msg.get("tool_call_id"), content)
        try:
            line = lines.get(key)
        except TypeError:  # an unhashable name or id: render without the memo
            out.append(_line(dialect, msg))
            continue
        if line is None:
            line = _line(dialect, msg)
            _remember_line(lines, key, line)
        out.append(line)
    return out


def _remember_line(memo: Memo[tuple[Any, ...], str], key: tuple[Any, ...], line: str) -> None:
    memo.put(key, line, len(key[-1]) + len(line))


def _line(dialect: Dialect, msg: Mapping[str, Any]) -> str:
    return dialect.line(msg)


# -- map-reduce planning ----------------------------------------------------------------------


def chunks(lines: Sequence[str], counts: Sequence[int], room: int, raw: Callable[[str], int]) -> list[list[str]]:
    """Pack consecutive lines into calls of at most `room` tokens each (counts are per line,
    separators included). A line that alone exceeds the room is shortened, head and tail kept."""
    if room < 1:
        raise ValueError("the summarizer's window leaves no room for the span")
    out: list[list[str]] = []
    current: list[str] = []
    used = 0
    for line, n in zip(lines, counts):
        if n > room:
            line = jsontext.head_tail(line, max(1, room - 8), raw)
            n = room
        if current and used + n > room:
            out.append(current)
            current, used = [], 0
        current.append(line)
        used += n
    if current:
        out.append(current)
    return out


def render(lines: Sequence[str], *, merge: bool = False) -> str:
    return (PARTS_HEADER if merge else TRANSCRIPT_HEADER) + "\n\n".join(lines)


# -- cache keys and answers -------------------------------------------------------------------


def span_key(tenant: str, model: str, max_tokens: int, lines: Sequence[str]) -> str:
    """The cache key of one summary: everything that changes the answer (the instructions'
    version, tenant, summarizer model, budget and the span's transcript), hashed."""
    return span_keys(tenant, model, max_tokens, [lines])[0]


def span_keys(tenant: str, model: str, max_tokens: int, spans: Sequence[Sequence[str]]) -> list[str]:
    """`span_key` of each span (`summary_key` of its `span_digests`)."""
    return [summary_key(tenant, model, max_tokens, digest) for digest in span_digests(spans)]


def summary_key(tenant: str, model: str, max_tokens: int, digest: str) -> str:
    """The cache key of the summary of the span known by `digest` (`span_digest`): SHA-256 over
    the instructions' version, tenant, summarizer model, budget and the digest, NUL-separated. A
    summary is found by its span's digest alone where the span's messages are no longer all in
    the request (`SummaryRequest.span`: a client slid them out since it was made)."""
    key = hashlib.sha256()
    for part in (PROMPT_VERSION, tenant, model, str(max_tokens), digest):
        key.update(part.encode("utf-8", "surrogatepass"))
        key.update(b"\x00")
    return "context-guard:summary:" + key.hexdigest()


def span_digest(lines: Sequence[str]) -> str:
    """The digest a span is known by: SHA-256 over the SHA-256 of each of its transcript lines,
    in order (hex)."""
    return span_digests([lines])[0]


def span_digests(spans: Sequence[Sequence[str]]) -> list[str]:
    """`span_digest` of each span. Line digests are memoised (a resent message's line is the same
    object, see `transcript`), and a plan's spans nest (each extends the one before), so the
    digest is carried over from one span to the next."""
    digests = []
    digest, done = hashlib.sha256(), 0  # `done` lines of the previous span are in `digest`
    previous: Sequence[str] = ()
    for lines in spans:
        if done > len(lines) or any(a is not b and a != b for a, b in zip(previous, lines[:done])):
            digest, done = hashlib.sha256(), 0  # not an extension of the previous span: start over
        for line in lines[done:]:
            digest.update(_line_digest(line))
        done, previous = len(lines), lines
        digests.append(digest.hexdigest())
    return digests


def _line_digest(line: str) -> bytes:
    digests = current().line_digests
    hit = digests.get(line)
    if hit is None:
        hit = hashlib.sha256(line.encode("utf-8", "surrogatepass")).digest()
        digests.put(line, hit, len(line))
    return hit


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str | None = None


def check(answer: Any, count: int, max_tokens: int) -> Verdict:
    """Whether a summarizer's answer may go into the request. An oversized answer (a provider
    that ignored max_tokens) is refused: the summary's cost was budgeted at max_tokens."""
    if not isinstance(answer, str) or not answer.strip():
        return Verdict(False, "summary_empty")
    if count > max_tokens:
        return Verdict(False, "summary_oversized")
    return Verdict(True)


@dataclass
class Summaries:
    """What one fit knows of its summaries (the state of `guard.fit.spans`): per span index the
    text and where it came from (`known`), the summary in the conversation and the span it stands
    for, the LLM calls made, the requests built per span, and what the report says of them."""

    known: dict[int, tuple[str, str]] = field(default_factory=dict)  # span index -> (text, source)
    message: Mapping[str, Any] | None = None
    span: list[int] | None = None
    calls: int = 0
    requests: dict[tuple[int, ...], Any] = field(default_factory=dict)  # built once per span, shared by copies
    report: dict[str, Any] | None = None  # source, calls, span sizes
    # the request of the summary in place (a `guard.fit.spans.SummaryRequest`): what a carried cut's
    # record names it by, its span's digest and budget, is worked out from it once the cut is recorded
    request: Any = None
    plan: tuple[int, int] = (0, 0)  # a carried cut's: the mark it was made to, the room it left its summary

    def copy(self) -> Summaries:
        return replace(
            self,
            known=dict(self.known),
            span=list(self.span) if self.span is not None else None,
            report=dict(self.report) if self.report is not None else None,
        )
