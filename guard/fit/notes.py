"""Notes: a question about something a carried cut removed gets the lines that hold it back, in a
message of the guard's own put just before the question, after the cached prefix.

A carried cut is kept byte for byte while it fits (`guard.fit.carried`), so a question asked after
it about an old fact the cut removed would not find the fact. Cutting the prefix again with the
new question brings the fact back but breaks the provider's cached prefix at the pinned prompt; a
note does not: the prefix stays as it was sent, and the note goes in the newest part of the
request, which the cache has not seen yet. It is a pure function of the history (the cut, the
first question after it that asks about what the cut removed, and what came before that
question), so every later turn that carries the cut sends it again, byte for byte."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from guard.core import relevance
from guard.core.budget import Budget
from guard.core.content import MARKER_PREFIX
from guard.fit import summary
from guard.fit.conversation import Context, Conversation
from guard.fit.cut_summaries import Made
from guard.fit.questions import query
from guard.fit.replay import SizeOf
from guard.fit.request import Counted

NOTE_MARK = (
    MARKER_PREFIX + " lines of earlier messages, cut to fit the context window, that the next message asks about]"
)
NOTE_ORIGIN = -2  # a note's origin in a Conversation (markers: -1): not a cut's edit (see `cut_fingerprint`)
LINE_CHARS = 400  # a restored line is clipped to this many characters around its first lost term
# a note's lines hold at most this many times the policy's truncated tool result and this share of
# the room, in tokens
NOTE_RESULTS, NOTE_ROOM = 2, 0.05


@dataclass(frozen=True)
class Note:
    """The note for one carried cut: where it goes (before message `index` of the request), the
    message, its tokens and how many lines it restores."""

    index: int
    message: Mapping[str, Any]
    tokens: int
    lines: int

    def report(self) -> dict[str, int]:
        return {"before_message": self.index, "lines": self.lines, "tokens": self.tokens}


def note_tokens(truncated_result_tokens: int, room: int) -> int:
    """The most tokens a note's lines may hold (see NOTE_RESULTS, NOTE_ROOM)."""
    return min(NOTE_RESULTS * truncated_result_tokens, int(room * NOTE_ROOM))


class Removed:
    """What a cut of a prefix removed, for the questions asked after it: the prefix's transcript
    lines, the messages the cut kept as they were and the text of every kept message, worked out
    once."""

    def __init__(self, cut: Conversation, part: Context) -> None:
        transcript = part.history.transcript
        self.lines: list[str] = transcript() if transcript is not None else []
        self.before = tuple(self.lines)
        messages = part.history.messages
        self.whole = {o for o, msg in zip(cut.origin, cut.messages) if o >= 0 and msg is messages[o]}
        self.kept = [
            self.lines[o] if o in self.whole else summary.transcript(cut.dialect, (msg,))[0]
            for o, msg in zip(cut.origin, cut.messages)
            if o >= 0
        ]
        self._kept_lines: set[str] | None = None

    def lines_for(self, question: str, tail: Sequence[str], chars: int) -> list[str]:
        """The text lines of what the cut removed that `question` asks about: lines of the
        prefix's messages the cut left out or edited, holding a term of the question that only the
        cut removed (`relevance.asked_terms` and `lost_of`, against the kept messages and `tail`, the transcript
        lines sent between the cut and the question) and in no kept message; in order, each
        clipped around its first such term, at most `chars` characters in all, those that hold the
        most such terms first. None where the question is not about what the cut removed."""
        had = relevance.asked_terms(question, self.before) if self.lines else frozenset()
        terms = relevance.lost_of(had, [*self.kept, *tail]) if had else frozenset()
        if not terms:
            return []
        if self._kept_lines is None:
            self._kept_lines = {line for text in self.kept for line in text.split("\n")}
        found: dict[str, tuple[int, int]] = {}  # a clipped line -> (lost terms it holds, where it came)
        for o, text in enumerate(self.lines):
            if o in self.whole:
                continue
            for line in text.split("\n"):
                low = line.lower()
                hits = [low.find(t) for t in terms if t in low]
                if not hits or line in self._kept_lines:
                    continue
                start = max(0, min(hits) - LINE_CHARS // 2) if len(line) > LINE_CHARS else 0
                clip = line[start : start + LINE_CHARS].strip()
                if clip not in found:
                    found[clip] = (len(hits), len(found))
        # the lines that hold the most of the lost terms first (a fact named by two of them over a
        # line that shares a common word), within `chars`; sent in the order they came
        chosen: list[tuple[int, str]] = []
        used = 0
        for clip, (_, at) in sorted(found.items(), key=lambda item: (-item[1][0], item[1][1])):
            if used + len(clip) <= chars:
                chosen.append((at, clip))
                used += len(clip) + 1
        return [clip for _, clip in sorted(chosen)]


def with_note(conv: Conversation, note: Note, n: int) -> Conversation:
    """`conv` (a carried cut followed by the request's messages after its prefix; the request has
    `n` messages) with `note` put before the request's message `note.index`: in no group a step may
    cut, like the messages around it."""
    at = len(conv.messages) - (n - note.index)
    return replace(
        conv,
        messages=(*conv.messages[:at], note.message, *conv.messages[at:]),
        counts=(*conv.counts[:at], note.tokens, *conv.counts[at:]),
        groups=(*conv.groups[:at], -1, *conv.groups[at:]),
        pinned=(*conv.pinned[:at], False, *conv.pinned[at:]),
        recent=(*conv.recent[:at], True, *conv.recent[at:]),
        pending=(*conv.pending[:at], None, *conv.pending[at:]),
        origin=(*conv.origin[:at], NOTE_ORIGIN, *conv.origin[at:]),
    )


CutOf = Callable[[int, int], Generator[Any, Any, "tuple[Conversation, Context] | None"]]


class Notes:
    """The notes of one request's carried cuts, one a cut: `cut_of` makes the cut of the first `m`
    messages to a mark (its lossy steps ranking by the question its prefix ended with),
    `prefix_size` the tokens it was carried with (with a summarizer, its summary's too); `sent`:
    each message's tokens as it goes over the room; `budget`: the cuts' (a note is made for its
    room), `room`: the request's, which a cut with its note must fit (the budget's unless set)."""

    def __init__(
        self, req: Counted, budget: Budget, ctx: Context, sent: Sequence[int], cut_of: CutOf, prefix_size: SizeOf
    ) -> None:
        self.dialect, self.messages, self.sent = req.dialect, req.messages, sent
        self.budget, self.counter, self.policy = budget, ctx.counter, ctx.policy
        self.room = budget.room
        self.cut_of, self.prefix_size = cut_of, prefix_size
        self._notes: dict[tuple[int, int], Note | None] = {}

    def note(self, m: int, mark: int) -> Generator[Any, Any, Note | None]:
        """The note of the cut of the first `m` messages to `mark` on this request: for the first
        question asked since its prefix that is about something it removed, once a cut (a later
        one waits for the next crossing: agents that send each tool's output as a user message ask
        every turn); None where no question is."""
        if (m, mark) not in self._notes:
            self._notes[m, mark] = yield from self._made(m, mark)
        return self._notes[m, mark]

    def tokens(self, m: int, mark: int) -> Generator[Any, Any, tuple[int, int] | None]:
        """Where that note goes and its tokens (the replay counts it: `guard.fit.replay.last_cut`)."""
        found = yield from self.note(m, mark)
        return None if found is None else (found.index, found.tokens)

    def noted(self, made: Made, m: int, mark: int) -> Generator[Any, Any, Made]:
        """`made` (the cut of the first `m` messages to `mark`, carried to the request: a
        conversation, its context and `m`) with its note, if it gets one and fits the room with
        it (None: it does not)."""
        if made is None or m >= len(self.messages):
            return made
        found = yield from self.note(m, mark)
        if found is None:
            return made
        conv, part, m = made
        conv = with_note(conv, found, len(self.messages))
        if conv.total > self.room:
            return None
        part.note = found.report()
        return conv, part, m

    def _made(self, m: int, mark: int) -> Generator[Any, Any, Note | None]:
        """The note, made to fit what the room left its question's request (the carried cut and
        the messages up to the question): a cut that fits with what the client added keeps
        fitting with its note, and the note is the same on every later turn."""
        dialect, messages, room = self.dialect, self.messages, self.budget.room
        users = [j for j in range(m, len(messages)) if dialect.is_user_turn(messages[j])]
        if not users or self.policy.relevance != "bm25":
            return None
        found = yield from self.cut_of(m, mark)
        base = (yield from self.prefix_size(m, mark)) if found is not None else None
        if found is None or base is None:
            return None
        lines = [line.split("] ", 1)[-1] for line in summary.transcript(dialect, messages[m : users[-1] + 1])]
        removed = Removed(*found)
        asked = _asked(m, users, query(dialect, messages[:m]), lines, removed)
        if asked is None:
            return None
        j, question = asked
        before = base + sum(self.sent[m : j + 1])  # the question's request, carrying the cut
        header = self.counter.message(dialect, dialect.marker(NOTE_MARK))
        cap = min(note_tokens(self.policy.truncated_tool_result_tokens, room), room - before - header)
        chars = 4 * cap
        for _ in range(4):  # (lines of code or JSON take more tokens than 4 characters each)
            restored = removed.lines_for(question, lines[: j - m], chars)
            if not restored:
                return None
            msg = dialect.marker("\n".join([NOTE_MARK, *restored]))
            tokens = self.counter.message(dialect, msg)
            if tokens <= header + cap:
                return Note(j, msg, tokens, len(restored))
            chars = chars * cap // (tokens - header) - 1
        return None


def _asked(
    m: int, users: list[int], question: str | None, lines: list[str], removed: Removed
) -> tuple[int, str] | None:
    """The first question asked after the first `m` messages (user turns at `users`; `lines`: the
    transcript lines from `m` on) that is about something the cut removed: a term of it the
    prefix's history holds is in no message the cut keeps, nor in any sent between the cut and
    the question. Judged on what came before the question only, so every later turn judges it
    the same (an answer that names the fact does not undo the note)."""
    seen = {question}
    for j in users:
        asked = lines[j - m]
        if asked not in seen and removed.lines_for(asked, lines[: j - m], LINE_CHARS):
            return j, asked
        seen.add(asked)
    return None
