"""Which older messages the current question is about: BM25 (the `bm25s` library) between the last
user message and each candidate, so lossy strategies cut what the question asks about last.

A candidate is *relevant* when its score is positive and at least `RELEVANT_SHARE` of the best
score. Strategies then take the other candidates first, oldest first, and the relevant ones after
them, oldest first: age still orders everything, relevance only moves the few matches to the back.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from typing import Sequence

from guard.jsontext import bounded_put

RELEVANT_SHARE = 0.5
# BM25 needs the terms of a document, not every byte of a 100 kB tool result: the head and the tail
# carry the identifiers of most results, and this bounds the time per candidate
_DOC_CHARS = 12_000


def _clip(text: str) -> str:
    if len(text) <= _DOC_CHARS:
        return text
    half = _DOC_CHARS // 2
    return text[:half] + "\n" + text[-half:]


def scores(query: str, docs: Sequence[str]) -> list[float]:
    """The BM25 score of each doc for the query (bm25s: its default tokenization with English stop
    words, its Lucene-variant scoring); 0 when nothing matches.

    Agent loops resend the same documents every turn, so each document's term counts are
    memoised, and the index bm25s builds holds the query's terms only, every other term of a
    document folded into one placeholder (BM25 reads only the query terms' frequencies and the
    documents' lengths). A document that contains none of the query's terms even as a substring
    scores 0 and is not tokenized: its length enters the average document length as an estimate
    from its characters (at the characters-per-term of the tokenized ones)."""
    import bm25s  # numpy-backed; imported on first use so the fast path never pays for it
    from bm25s.tokenization import Tokenized

    zeros = [0.0] * len(docs)
    if not docs or not query.strip():
        return zeros
    terms = list(dict.fromkeys(_terms([query])[0][1]))
    if not terms:
        return zeros
    lowered = [_lowered(d) for d in docs]
    hit = [i for i, d in enumerate(lowered) if any(t in d for t in terms)]
    if not hit:
        return zeros
    stats = dict(zip(hit, _terms([docs[i] for i in hit])))
    present = [t for t in terms if any(t in counts for _, counts in stats.values())]
    if not present:
        return zeros
    chars = sum(len(lowered[i]) for i in hit)
    per_term = chars / max(1, sum(length for length, _ in stats.values()))
    vocab = {t: i for i, t in enumerate(present)}
    other = len(vocab)
    vocab[""] = other
    ids: list[list[int]] = []
    for i in range(len(docs)):
        if i not in stats:
            ids.append([other] * max(1, round(len(lowered[i]) / max(per_term, 1e-9))))
            continue
        length, counts = stats[i]
        row: list[int] = []
        for t in present:
            row += [vocab[t]] * counts.get(t, 0)
        ids.append(row + [other] * (length - len(row)))
    retriever = bm25s.BM25()
    retriever.index(Tokenized(ids=ids, vocab=vocab), show_progress=False)
    return [float(x) for x in retriever.get_scores([vocab[t] for t in present])]


_LOWER: dict[str, str] = {}


def _lowered(text: str) -> str:
    """The clipped document in lower case (what the substring test reads), memoised."""
    hit = _LOWER.get(text)
    if hit is None:
        hit = _clip(text).lower()
        bounded_put(_LOWER, text, hit, 4096)
    return hit


_MEMO: dict[str, tuple[int, dict[str, int]]] = {}
_MEMO_LIMIT = 20_000
_lock = threading.Lock()


def _terms(texts: list[str]) -> list[tuple[int, dict[str, int]]]:
    """(number of terms, count per term) of each text, memoised. Terms as `bm25s.tokenize` makes
    them by default (lower case, its token pattern, its English stop words removed), counted with
    one regex pass and a Counter: several times faster than building its vocabulary per call."""
    with _lock:
        found = [_MEMO.get(t) for t in texts]
    missing = list(dict.fromkeys(t for t, f in zip(texts, found) if f is None))
    if missing:
        stop = _stopwords()
        new = {}
        for text in missing:
            counts = Counter(_TOKEN.findall(_lowered(text)))
            for word in stop.intersection(counts):
                del counts[word]
            new[text] = (sum(counts.values()), dict(counts))
        with _lock:
            if len(_MEMO) + len(new) > _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO.update(new)
        found = [f if f is not None else new[t] for t, f in zip(texts, found)]
    return found  # type: ignore[return-value]


_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's default token_pattern


@functools.lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def relevant(values: Sequence[float], share: float = RELEVANT_SHARE) -> set[int]:
    """Indices whose score is positive and within `share` of the best."""
    best = max(values, default=0.0)
    if best <= 0:
        return set()
    return {i for i, s in enumerate(values) if s > 0 and s >= share * best}
