"""Counting the tokens of what is really sent.

`TokenCounter` counts a chat body the way the provider will see it: every message's content
(strings and parts), names, tool calls (name + arguments), tool results as serialized, images by
provider formula, per-message framing, the tool schemas and the reply priming. The encoding is
injected (anything with `encode_ordinary`), so this module never loads a tokenizer itself.

OpenAI framing follows OpenAI's published accounting for chat models: 3 tokens per message, every
string field of the message (role, content, name, tool_call_id, ...) encoded, +1 for a name, +3 to
prime the reply. Tool calls add their name, arguments and 3 tokens of framing; tool schemas are
counted as compact JSON plus 8 tokens each (more than OpenAI's internal rendering, never less).
For models without an exact local tokenizer the text count is multiplied by a calibration factor
(see `guard.models`); images keep their provider formula.

Agent loops resend the same prefix every turn, so per-message counts are memoised by a structural
hash of the message: a re-check costs the new messages only.
"""

from __future__ import annotations

import math
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Mapping
from typing import Any, Protocol, Sequence

from guard.dialects import TEXT_PARTS, Dialect, compact_json
from guard.encodings import twin
from guard.images import image_part_tokens

REPLY_PRIMING = 3
TOOL_CALL_FRAMING = 3
PDF_PAGE_TOKENS = 3000  # Anthropic: a PDF page costs its text plus an image, ~1.5k-3k tokens
_RUN = 4096  # non-space runs longer than this are split: BPE on them is super-linear
_LONG_RUN = re.compile(r"(?<!\S)\S{%d,}" % _RUN)
_SPACE = re.compile(r"\s")
_MEMO_MIN_CHARS, _MEMO_MAX_CHARS = 64, 1 << 16
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?!s)")


def _may_have_long_run(text: str) -> bool:
    """True if text may hold a run of _RUN non-space characters: such a run covers at least one
    whole aligned window of _RUN/2 characters with no whitespace. Probes stop at the first space."""
    half = _RUN // 2
    search = _SPACE.search
    for start in range(0, len(text) - half + 1, half):
        if search(text, start, start + half) is None:
            return True
    return False


_PARALLEL_CHARS = 200_000
_POOL: ThreadPoolExecutor | None = None


_WORKER = threading.local()  # set in the pool's thread: it encodes with its own twin encoder


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="context-guard-count", initializer=_mark_worker)
    return _POOL


def _mark_worker() -> None:
    _WORKER.twins = True


class Encoding(Protocol):
    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...


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


class TokenCounter:
    """Counts chat bodies with one encoding, calibration factor and image formula."""

    def __init__(
        self,
        encoding: Encoding,
        *,
        factor: float = 1.0,
        image_formula: str = "openai",
        cache_size: int = 200_000,
    ) -> None:
        if not factor > 0:
            raise ValueError("a calibration factor must be positive")
        self.encoding = encoding
        self.factor = factor
        self.image_formula = image_formula
        self._cache: dict[int, int] = {}  # insertion order: the oldest entry is evicted first
        self._cache_size = cache_size
        # a rewritten text is counted by the strategy that made it, then again inside its message
        self._raw_memo: dict[str, int] = {}
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
            if len(self._raw_memo) >= 1024:
                self._raw_memo.clear()
            self._raw_memo[text] = n
        return n

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
        """Counts of many messages; the hit path is inlined (it runs for every resent message)."""
        get, name = self._cache.get, dialect.name
        out: list[int] = []
        misses: list[tuple[int, Mapping[str, Any], int]] = []
        for m in msgs:
            key = hash((name, _message_key(m)))
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
        return out

    def _count_all(self, dialect: Dialect, misses: list[tuple[int, Mapping[str, Any], int]]) -> list[tuple[int, int]]:
        """Count cache misses; a large batch is split over two threads (tiktoken's encoder releases
        the GIL, so a cold 300k-token request is counted on two cores)."""
        def run(part: list[tuple[int, Mapping[str, Any], int]]) -> list[tuple[int, int]]:
            return [(position, self._count(dialect, m, key)) for position, m, key in part]

        size = sum(len(c) if isinstance(c := m.get("content"), str) else 2048 for _, m, _ in misses)
        if size < _PARALLEL_CHARS or len(misses) < 8:
            return run(misses)
        half = len(misses) // 2
        other = _pool().submit(run, misses[half:])
        return run(misses[:half]) + other.result()

    def _count(self, dialect: Dialect, msg: Mapping[str, Any], key: int) -> int:
        self.misses += 1
        text, img = dialect.count(self, msg)
        n = self._calibrated(text, img)
        cache = self._cache
        cache[key] = n
        if len(cache) > self._cache_size:
            try:
                del cache[next(iter(cache))]
            except (KeyError, StopIteration, RuntimeError):  # another thread got there first
                pass
        return n

    def fixed(self, dialect: Dialect, body: Mapping[str, Any]) -> int:
        """Tokens outside the list of turns: pinned prompt, tool schemas, formats, reply priming."""
        parts = tuple(body.get(k) for k in dialect.fixed_keys)
        key = hash(("\x00fixed", dialect.name, freeze(parts)))
        hit = self._cache.get(key)
        if hit is None:
            text, img = dialect.count_fixed(self, body)
            hit = self._cache[key] = self._calibrated(REPLY_PRIMING + text, img)
        return hit

    def body(self, dialect: Dialect, body: Mapping[str, Any]) -> int:
        return self.fixed(dialect, body) + sum(self.messages(dialect, dialect.messages(body)))

    # -- shapes -------------------------------------------------------------------------------
    def content(self, value: Any) -> tuple[int, int]:
        """(text, image) tokens of a content value: a string, or a list of parts or blocks (any
        dialect); anything else counts nothing."""
        if isinstance(value, str):
            return self.raw(value), 0
        if isinstance(value, list):
            return self.parts(value)
        return 0, 0

    def field(self, value: Any) -> int:
        """Tokens of a field as sent: a string as it is, a structure as compact JSON, None nothing."""
        if value is None:
            return 0
        return self.raw(value) if isinstance(value, str) else self.raw(compact_json(value))

    def parts(self, blocks: list[Any]) -> tuple[int, int]:
        """Text and image tokens of a list of content parts or blocks, of any dialect."""
        text = img = 0
        for b in blocks:
            if isinstance(b, str):
                text += self.raw(b)
                continue
            if not isinstance(b, Mapping):
                text += self.raw(compact_json(b))
                continue
            kind = b.get("type")
            if kind in TEXT_PARTS and isinstance(b.get("text"), str):
                text += self.raw(b["text"])
            elif kind in ("image_url", "image", "input_image"):
                img += image_part_tokens(b, self.image_formula)
            elif kind == "input_file":
                text += self._file(b)
            elif kind == "tool_use":
                text += TOOL_CALL_FRAMING + self.raw(str(b.get("name", "")))
                text += self.raw(compact_json(b.get("input", {})))
            elif kind == "tool_result":
                text += TOOL_CALL_FRAMING
                inner = b.get("content")
                if isinstance(inner, str):
                    text += self.raw(inner)
                elif isinstance(inner, list):
                    t, i = self.parts(inner)
                    text, img = text + t, img + i
            elif kind == "thinking" and isinstance(b.get("thinking"), str):
                text += self.raw(b["thinking"])
            elif kind == "redacted_thinking" and isinstance(b.get("data"), str):
                text += self.raw(b["data"])
            elif kind == "document":
                text += self._document(b)
            else:
                text += self.raw(compact_json(b))
        return text, img

    def _file(self, part: Mapping[str, Any]) -> int:
        """A Responses `input_file`: a PDF sent inline costs its pages; a file by id or URL is
        counted as its JSON (the provider's count of it is unknown here)."""
        data = part.get("file_data")
        if isinstance(data, str) and data.startswith("data:") and "," in data:
            return self._document({"source": {"type": "base64", "data": data.split(",", 1)[1]}})
        return self.raw(compact_json(part))

    def _document(self, block: Mapping[str, Any]) -> int:
        source = block.get("source")
        if not isinstance(source, Mapping):
            return self.raw(compact_json(block))
        data = source.get("data")
        if source.get("type") == "text" and isinstance(data, str):
            return self.raw(data)
        if source.get("type") == "base64" and isinstance(data, str):
            import base64
            import binascii

            try:
                raw = base64.b64decode(data, validate=False)
            except (binascii.Error, ValueError):
                return self.raw(data)
            return PDF_PAGE_TOKENS * max(1, len(_PDF_PAGE.findall(raw)))
        return self.raw(compact_json(block))
