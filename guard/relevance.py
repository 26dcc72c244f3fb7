"""Which older messages the current question is about: BM25 (the `bm25s` library) between the last
user message and each candidate, so lossy strategies cut what the question asks about last.

A candidate is *relevant* when its score is positive and at least `RELEVANT_SHARE` of the best
score. Strategies then take the other candidates first, oldest first, and the relevant ones after
them, oldest first: age still orders everything, relevance only moves the few matches to the back.
"""

from __future__ import annotations

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
    """The BM25 score of each doc for the query (English stop words removed); 0 when nothing matches."""
    import bm25s  # numpy-backed; imported on first use so the fast path never pays for it

    zeros = [0.0] * len(docs)
    if not docs or not query.strip():
        return zeros
    corpus = bm25s.tokenize([_clip(d) for d in docs], stopwords="en", show_progress=False)
    terms = bm25s.tokenize(_clip(query), stopwords="en", show_progress=False, return_ids=False)[0]
    terms = [t for t in terms if t in corpus.vocab]
    if not terms:
        return zeros
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    return [float(s) for s in retriever.get_scores(terms)]


def relevant(values: Sequence[float], share: float = RELEVANT_SHARE) -> set[int]:
    """Indices whose score is positive and within `share` of the best."""
    best = max(values, default=0.0)
    if best <= 0:
        return set()
    return {i for i, s in enumerate(values) if s > 0 and s >= share * best}
