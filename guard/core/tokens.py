"""Counting the tokens of what is really sent: the encoder and its memo.

`TokenCounter` counts a body the way the provider will see it, with one encoding, calibration factor
and image formula. What a message is made of (content parts, names, tool calls, tool results as
serialized, images, per-message framing) is its dialect's knowledge (`Dialect.count`, and
`guard.dialects.base.count_content` for blocks); the counter encodes text (`raw`, `field`),
memoises per message, and adds the reply priming. The encoding is injected (anything with
`encode_ordinary`), so this module never loads a tokenizer itself.

OpenAI framing follows OpenAI's published accounting for chat models: 3 tokens per message, every
string field of the message (role, content, name, tool_call_id, ...) encoded, +1 for a name, +3 to
prime the reply. Tool calls add their name, arguments and 3 tokens of framing; tool schemas are
counted as compact JSON plus 8 tokens each (more than OpenAI's internal rendering, never less).
For models without an exact local tokenizer the text count is multiplied by a calibration factor
(see `guard.core.models`); images keep their provider formula.

Agent loops resend the same prefix every turn, so per-message counts are memoised by a structural
hash of the message: a re-check costs the new messages only.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from guard.core import cpus
from guard.core.content import compact_json
from guard.core.encodings import twin
from guard.core.memo import Memo

REPLY_PRIMING = 3
_RUN = 4096  # non-space runs longer than this are split: BPE on them is super-linear
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{_RUN},}}")
_SPACE = re.compile(r"\s")
_MEMO_MIN_CHARS, _MEMO_MAX_CHARS = 64, 1 << 16


def _may_have_long_run(text: str) -> bool:
    """True if text may hold a run of _RUN non-space characters: such a run covers at least one
    whole aligned window of _RUN/2 characters with no whitespace. Probes stop at the first space."""
    half = _RUN // 2
    search = _SPACE.search
    return any(search(text, start, start + half) is None for start in range(0, len(text) - half + 1, half))


_PARALLEL_CHARS = 200_000
_POOL: ThreadPoolExecutor | None = None
_THREADS = 2  # threads that count a large cold batch in this process (`set_counting_threads`)


def set_counting_threads(threads: int) -> None:
    """How many threads count a large cold batch in this process: 2 (the default), the second
    encoding with a twin of the encoder (`guard.core.encodings.twin`), where the process may run on
    two CPUs; or 1. Two count a cold request of 322k tokens of agent turns in 31-33 ms rather than
    50-52 (its cold fit takes 116-124 ms rather than 144-147) for ~40 MB more in the process (the
    twin), and gain a busy proxy whose workers each have a core nothing: its two workers served as
    many overflowing turns with one (bench.overhead). Two threads on one encoder contend inside it
    and count slower than one. A proxy sets this from `context_guard.worker.counting_threads`."""
    global _THREADS
    if threads not in (1, 2):
        raise ValueError(f"counting_threads is 1 or 2, not {threads!r}")
    _THREADS = threads


def _two_threads() -> bool:
    """Whether a large cold batch is counted on two threads (`set_counting_threads`)."""
    return _THREADS == 2 and _two_cpus()


_WORKER = threading.local()  # set in the pool's thread: it encodes with its own twin encoder


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="context-guard-count", initializer=_mark_worker)
    return _POOL


def _mark_worker() -> None:
    _WORKER.twins = True


@functools.cache
def _two_cpus() -> bool:
    """Whether this process may use two CPUs or more (`guard.core.cpus.usable`): a worker pinned to
    one (`taskset`, a one-CPU cpuset) or limited to less than two by its container's CPU quota gains
    nothing from a second counting thread, and its twin encoder costs ~40 MB
    (`guard.core.encodings.twin`)."""
    return cpus.usable() >= 2


class Encoding(Protocol):
    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...


class Dialect(Protocol):
    """What the counter needs of a wire format (`guard.dialects.Dialect`): its name, the body keys
    counted once per body, and how one message and the fixed parts count with this counter."""

    @property
    def name(self) -> str: ...

    @property
    def fixed_keys(self) -> tuple[str, ...]: ...

    def messages(self, body: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]: ...

    def count(self, counter: TokenCounter, msg: Mapping[str, Any]) -> tuple[int, int]: ...

    def count_fixed(self, counter: TokenCounter, body: Mapping[str, Any]) -> tuple[int, int]: ...


_LIST = "\x00list"


def freeze(value: Any) -> Any:
    """A hashable, equality-preserving copy of a JSON-like value (tuples all the way down)."""
    kind = type(value)  # exact type checks first: this runs for every message of every request
    if kind is str:
        return value
    if kind is dict:
        return tuple([(k, freeze(v)) for k, v in value.items()])
    if kind is list:
        return (_LIST, *[freeze(v) for v in value])
    if value is None or kind is int or kind is float or kind is bool:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        return tuple([(k, freeze(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (_LIST, *[freeze(v) for v in value])
    return repr(value)


def _calls_key(calls: Any) -> Any:
    """Key of an OpenAI tool_calls list: only function names and arguments are counted."""
    out = []
    for call in calls:
        fn = call.get("function") if type(call) is dict else None
        if type(fn) is not dict:
            return freeze(calls)
        name, args = fn.get("name"), fn.get("arguments")
        if not (type(name) is str or name is None) or not (type(args) is str or args is None):
            return freeze(calls)
        out.append((name, args))
    return (_LIST, *out)


def _message_key(msg: Mapping[str, Any]) -> Any:
    """A hashable key, equal for messages whose counts are equal by construction: every value that
    is counted, with a fast path for string values and OpenAI tool calls (hashing runs for every
    message of every request, so it avoids walking nested structures in Python where it can)."""
    if type(msg) is not dict:
        return freeze(msg)
    parts: list[tuple[Any, ...]] = []
    for k, v in msg.items():
        if type(v) is str or v is None:
            parts.append((k, v))
        elif k == "tool_calls" and type(v) is list:
            parts.append((k, "\x00calls", _calls_key(v)))
        else:
            parts.append((k, freeze(v)))
    return tuple(parts)


def message_hash(dialect_name: str, msg: Mapping[str, Any]) -> int:
    """A hash of a message's counted content, as the counter keys its memo (in-process only: string
    hashes are salted per process)."""
    return hash((dialect_name, _message_key(msg)))


class TokenCounter:
    """Counts chat bodies with one encoding, calibration factor, image formula, tool framing and
    the provider's framing of a chat body (`renders`)."""

    def __init__(
        self,
        encoding: Encoding,
        *,
        factor: float = 1.0,
        image_formula: str = "openai",
        cache_size: int = 200_000,
        tool_framing: str = "json",
        renders: str = "generic",
    ) -> None:
        if not factor > 0:
            raise ValueError("a calibration factor must be positive")
        self.encoding = encoding
        self.factor = factor
        self.image_formula = image_formula
        self.tool_framing = tool_framing  # how the provider frames tool schemas (ModelProfile.tool_framing)
        # whose framing a chat body goes out in (ModelProfile.renders): "anthropic" counts a chat
        # body as the Messages request LiteLLM sends (blocks, tool-use prompt), else OpenAI's
        self.renders = renders
        self._cache: Memo[int, int] = Memo(cache_size)  # per message and per fixed part
        # a rewritten text is counted by the strategy that made it, then again inside its message
        self._raw_memo: Memo[str, int] = Memo(1024)
        self.hits = 0
        self.misses = 0

    # -- text ---------------------------------------------------------------------------------
    def raw(self, text: str) -> int:
        """Tokens of a string with the encoding, bounded in time on pathological input."""
        size = len(text)
        memo = _MEMO_MIN_CHARS <= size <= _MEMO_MAX_CHARS
        if memo:
            hit = self._raw_memo.get(text)
            if hit is not None:
                return hit
        n = self._raw(text)
        if memo:
            self._raw_memo.put(text, n)
        return n

    def prepare_threads(self) -> bool:
        """Build, now, the twin encoder the second counting thread encodes with (where two threads
        count: `set_counting_threads`, `_count_all`), so that no request pays for it: ~0.7 s of
        mostly Python work (reading the ranks again), which the first large cold request of each
        worker would otherwise spend holding the interpreter. Whether a twin is in place."""
        if not _two_threads():
            return False
        twin(self.encoding)
        return True

    def _raw(self, text: str) -> int:
        enc = (twin(self.encoding) if getattr(_WORKER, "twins", False) else self.encoding).encode_ordinary
        if len(text) < _RUN or not _may_have_long_run(text):
            return len(enc(text))
        total, last = 0, 0
        for m in _LONG_RUN.finditer(text):
            total += len(enc(text[last : m.start()]))
            run = m.group()
            for i in range(0, len(run), _RUN):
                total += len(enc(run[i : i + _RUN])) + 1  # +1: a split never under-counts
            last = m.end()
        return total + len(enc(text[last:]))

    def _calibrated(self, text_tokens: int, image_tokens: int) -> int:
        if self.factor == 1.0:
            return text_tokens + image_tokens
        return math.ceil(text_tokens * self.factor) + image_tokens

    # -- messages -----------------------------------------------------------------------------
    def message(self, dialect: Dialect, msg: Mapping[str, Any]) -> int:
        return self.messages(dialect, (msg,))[0]

    def messages(self, dialect: Dialect, msgs: Sequence[Mapping[str, Any]]) -> list[int]:
        """Counts of many messages."""
        return self.keyed(dialect, msgs)[0]

    def keyed(self, dialect: Dialect, msgs: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[int]]:
        """Counts of many messages and each one's `message_hash` (worked out once: what else keys
        a message by its content takes it from here); the hit path is inlined (it runs for every
        resent message)."""
        get, name = self._cache.get, dialect.name
        out: list[int] = []
        keys: list[int] = []
        misses: list[tuple[int, Mapping[str, Any], int]] = []
        for m in msgs:
            key = hash((name, _message_key(m)))
            keys.append(key)
            n = get(key)
            if n is None:
                misses.append((len(out), m, key))
                n = 0
            else:
                self.hits += 1
            out.append(n)
        if misses:
            for position, n in self._count_all(dialect, misses):
                out[position] = n
        return out, keys

    def _count_all(self, dialect: Dialect, misses: list[tuple[int, Mapping[str, Any], int]]) -> list[tuple[int, int]]:
        """Count cache misses; a large batch, where two threads count (`set_counting_threads`), is
        split over them (tiktoken's encoder releases the GIL, so a cold 300k-token request is
        counted on two cores)."""

        def run(part: Iterable[tuple[int, Mapping[str, Any], int]]) -> list[tuple[int, int]]:
            return [(position, self._count(dialect, m, key)) for position, m, key in part]

        size = sum(len(c) if isinstance(c := m.get("content"), str) else 2048 for _, m, _ in misses)
        if size < _PARALLEL_CHARS or len(misses) < 8 or not _two_threads():
            return run(misses)
        # both threads take the next message from one iterator (each message once: `next` runs
        # under the GIL), so neither waits for the other's half (the pool's thread encodes a little
        # slower: a fixed split leaves this one idle at the end)
        todo = iter(misses)
        other = _pool().submit(run, todo)
        return run(todo) + other.result()

    def _count(self, dialect: Dialect, msg: Mapping[str, Any], key: int) -> int:
        self.misses += 1
        text, img = dialect.count(self, msg)
        n = self._calibrated(text, img)
        return self._cache.put(key, n)

    def fixed(self, dialect: Dialect, body: Mapping[str, Any]) -> int:
        """Tokens outside the list of turns: pinned prompt, tool schemas, formats, reply priming."""
        parts = tuple(body.get(k) for k in dialect.fixed_keys)
        key = hash(("\x00fixed", dialect.name, freeze(parts)))
        hit = self._cache.get(key)
        if hit is None:
            text, img = dialect.count_fixed(self, body)
            hit = self._cache.put(key, self._calibrated(REPLY_PRIMING + text, img))
        return hit

    def body(self, dialect: Dialect, body: Mapping[str, Any]) -> int:
        return self.fixed(dialect, body) + sum(self.messages(dialect, dialect.messages(body)))

    # -- fields -------------------------------------------------------------------------------
    def field(self, value: Any) -> int:
        """Tokens of a field as sent: a string as it is, a structure as compact JSON, None nothing."""
        if value is None:
            return 0
        return self.raw(value) if isinstance(value, str) else self.raw(compact_json(value))
