"""Which older messages the current question is about: BM25 (the `bm25s` library) between the last
user message and each candidate, so lossy strategies cut what the question asks about last.

A candidate is *relevant* when its score is positive and at least `RELEVANT_SHARE` of the best
score. Strategies then take the other candidates first, oldest first, and the relevant ones after
them, oldest first: age still orders everything, relevance only moves the few matches to the back.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Sequence

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
    """The BM25 score of each doc for the query (bm25s: its tokenizer with English stop words, its
    Lucene-variant scoring); 0 when nothing matches.

    Agent loops resend the same documents every turn, so each document's term counts are
    memoised, and the index bm25s builds holds the query's terms only, every other term of a
    document folded into one placeholder: the scores are the same as with the full vocabulary
    (BM25 reads term and document frequencies of the query's terms and document lengths only)."""
    import bm25s  # numpy-backed; imported on first use so the fast path never pays for it
    from bm25s.tokenization import Tokenized

    zeros = [0.0] * len(docs)
    if not docs or not query.strip():
        return zeros
    terms = list(dict.fromkeys(_terms([query])[0][1]))
    stats = _terms(list(docs))
    present = [t for t in terms if any(t in counts for _, counts in stats)]
    if not present:
        return zeros
    vocab = {t: i for i, t in enumerate(present)}
    other = len(vocab)
    vocab[""] = other
    ids: list[list[int]] = []
    for length, counts in stats:
        row: list[int] = []
        for t in present:
            row += [vocab[t]] * counts.get(t, 0)
        ids.append(row + [other] * (length - len(row)))
    retriever = bm25s.BM25()
    retriever.index(Tokenized(ids=ids, vocab=vocab), show_progress=False)
    return [float(x) for x in retriever.get_scores([vocab[t] for t in present])]


_MEMO: dict[str, tuple[int, dict[str, int]]] = {}
_MEMO_LIMIT = 20_000
_lock = threading.Lock()


def _terms(texts: list[str]) -> list[tuple[int, dict[str, int]]]:
    """(number of terms, count per term) of each text, memoised."""
    import bm25s

    with _lock:
        found = [_MEMO.get(t) for t in texts]
    missing = list(dict.fromkeys(t for t, f in zip(texts, found) if f is None))
    if missing:
        tokens = bm25s.tokenize([_clip(t) for t in missing], stopwords="en", show_progress=False, return_ids=False)
        new = {t: (len(toks), dict(Counter(toks))) for t, toks in zip(missing, tokens)}
        with _lock:
            if len(_MEMO) + len(new) > _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO.update(new)
        found = [f if f is not None else new[t] for t, f in zip(texts, found)]
    return found  # type: ignore[return-value]


def relevant(values: Sequence[float], share: float = RELEVANT_SHARE) -> set[int]:
    """Indices whose score is positive and within `share` of the best."""
    best = max(values, default=0.0)
    if best <= 0:
        return set()
    return {i for i, s in enumerate(values) if s > 0 and s >= share * best}
