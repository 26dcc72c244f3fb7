"""Which older messages the current question is about: BM25 between the last user message and each
candidate (the tokenization and stop words of the `bm25s` library, its Lucene-variant formula), so
lossy strategies cut what the question asks about last.

A candidate is *relevant* when its score is positive and at least `RELEVANT_SHARE` of the best
score (per band of the history, see `relevant_in_bands`). Strategies then take the other
candidates first, oldest first, and the relevant ones after them, oldest first: age still orders
everything, relevance only moves the few matches to the back.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from guard.core.memo import current

RELEVANT_SHARE = 0.5
# BM25 needs the terms of a document, not every byte of a 100 kB tool result: the head and the tail
# carry the identifiers of most results, and this bounds the time per candidate
_DOC_CHARS = 12_000


def _clip(text: str) -> str:
    if len(text) <= _DOC_CHARS:
        return text
    half = _DOC_CHARS // 2
    return text[:half] + "\n" + text[-half:]


K1, B = 1.5, 0.75  # bm25s's defaults; its "lucene" scoring is the formula below


def scores(query: str, docs: Sequence[str]) -> list[float]:
    """The BM25 score of each doc for the query (bm25s's tokenization with English stop words, its
    Lucene-variant scoring, the same numbers its index gives); 0 when nothing matches."""
    table = _table(query, docs)
    if table is None:
        return [0.0] * len(docs)
    out = [0.0] * len(docs)
    rows, values = _scored(table, len(docs))
    for i, v in zip(rows.tolist(), values.tolist()):
        out[i] = v
    return out


def relevant_in_bands(query: str, docs: Sequence[str], ends: Sequence[int], share: float = RELEVANT_SHARE) -> set[int]:
    """The relevant docs (see `relevant`) of each band `docs[ends[k-1]:ends[k]]`, each band judged
    with the statistics (number of docs, document frequencies, mean length) and the best score of
    the docs up to its own end. Docs appended after a band never change its verdicts: a growing
    conversation keeps the order its older history is cut in."""
    table = _table(query, docs)
    if table is None:
        return set()
    out: set[int] = set()
    start = 0
    for end in ends:
        rows, values = _scored(table, end)
        band = rows.tolist()
        out.update(band[j] for j in relevant(values.tolist(), share) if band[j] >= start)
        start = end
    return out


class _Table(NamedTuple):
    """What `_table` makes: `hit`, the ascending indices of the docs that hold a query term (as a
    substring of their lower-case text);
    `rows`, `cols` and `values`, one entry per (matching doc, query term it holds) with its count,
    by row (an index into `hit`) and then by term (the term's place in the query); `lengths`, every
    doc's length in terms; `terms`, the number of the query's distinct terms."""

    hit: Any
    rows: Any
    cols: Any
    values: Any
    lengths: Any
    terms: int


# a question with more terms than this has every doc read first: most docs hold one of its terms,
# and reading a doc (which a hit needs anyway) costs less than looking for hundreds of substrings
_SCAN_TERMS = 16


def _table(query: str, docs: Sequence[str]) -> _Table | None:
    """The docs that hold a query term as a substring (`hit`), their counts of the query's terms
    and every doc's length in terms (`_Table`), or None if no doc matches.

    Agent loops resend the same documents every turn, so each document's term counts are
    memoised. A doc that holds none of the query's terms even as a substring scores 0 and is not
    read: its length enters the mean document length as an estimate from its characters (at the
    characters-per-term of the docs that hold one). Which docs hit is a function of the texts
    alone, whatever the memos hold (a doc holding a query term as a term holds it as a substring;
    only the others are searched)."""
    import numpy as np  # imported on first use so the fast path never pays for it

    if not docs or not query.strip():
        return None
    terms = list(dict.fromkeys(_terms([query])[0][1]))
    if not terms:
        return None
    # (a set, not a frozenset: `dict.keys() & set` walks the smaller of the two, `& frozenset`
    # every one of a long question's terms)
    asked = set(terms)
    lowered = [_lowered(d) for d in docs]
    known = current().term_counts.get
    if len(terms) > _SCAN_TERMS:
        holding = {i for i, (_, counts) in enumerate(_terms(list(docs))) if not counts.keys().isdisjoint(asked)}
    else:
        holding = {
            i
            for i, doc in enumerate(docs)
            if (counted := known(doc)) is not None and not counted[1].keys().isdisjoint(asked)
        }
    hit = [i for i, low in enumerate(lowered) if i in holding or any(t in low for t in terms)]
    if not hit:
        return None
    stats = _terms([docs[i] for i in hit])
    column = {t: j for j, t in enumerate(terms)}
    cols: list[int] = []
    values: list[int] = []
    sizes: list[int] = []
    # the table is sparse: one entry per (doc, query term it holds) (a dense docs x terms matrix was
    # mostly zeros: a long question has hundreds of terms, a doc a few of them)
    for _, counts in stats:
        common = counts.keys() & asked  # (a set intersection per doc: most docs hold few of a long question's terms)
        cols += map(column.__getitem__, common)
        values += map(counts.__getitem__, common)
        sizes.append(len(common))
    per_term = sum(len(lowered[i]) for i in hit) / max(1, sum(length for length, _ in stats))
    lengths = np.array([max(1, round(len(d) / max(per_term, 1e-9))) for d in lowered], dtype=float)
    lengths[hit] = [length for length, _ in stats]
    rows = np.repeat(np.arange(len(hit)), sizes)
    # each doc's entries in the query's term order: the same sums in the same order on every worker
    # (a set's order follows its strings' hashes, which differ from process to process)
    order = np.lexsort((np.array(cols, dtype=np.intp), rows))
    return _Table(
        np.array(hit),
        rows,
        np.array(cols, dtype=np.intp)[order],
        np.array(values, dtype=float)[order],
        lengths,
        len(terms),
    )


def _scored(table: _Table, end: int) -> tuple[Any, Any]:
    """(rows, BM25 scores) of the matching docs among `docs[:end]`, with the statistics of those
    `end` docs: idf = ln(1 + (N - df + 0.5) / (df + 0.5)); per term tf / (tf + K1 (1 - B + B dl / avgdl))."""
    import numpy as np

    inside = int(np.searchsorted(table.hit, end))  # (the docs before `end` are a prefix of `hit`)
    if not inside:
        return table.hit[:0], np.zeros(0)
    entries = int(np.searchsorted(table.rows, inside))  # (and so are their entries)
    rows, cols, tf = table.rows[:entries], table.cols[:entries], table.values[:entries]
    docs = table.hit[:inside]
    df = np.bincount(cols, minlength=table.terms)
    idf = np.log1p((end - df + 0.5) / (df + 0.5))
    norm = K1 * (1 - B + B * table.lengths[docs] / table.lengths[:end].mean())
    return docs, np.bincount(rows, weights=idf[cols] * tf / (tf + norm[rows]), minlength=inside)


def _lowered(text: str) -> str:
    """The clipped document in lower case (what the substring test reads), memoised."""
    lowered = current().lowered
    hit = lowered.get(text)
    if hit is None:
        hit = lowered.put(text, _clip(text).lower())
    return hit


def _terms(texts: list[str]) -> list[tuple[int, dict[str, int]]]:
    """(number of terms, count per term) of each text, memoised. Terms as `bm25s.tokenize` makes
    them by default (lower case, its token pattern, its English stop words removed), counted with
    one pass over the text (`_runs`) and a Counter: several times faster than building its vocabulary per call."""
    memo = current().term_counts
    found = [memo.get(t) for t in texts]
    missing = list(dict.fromkeys(t for t, f in zip(texts, found) if f is None))
    if missing:
        words = current().text_words
        new = {}
        for text in missing:
            counted, joined = _read(text, terms=True, words=len(text) <= _DOC_CHARS and text not in words)
            new[text] = counted if counted is not None else (0, {})
            if joined is not None:  # (one pass read both: the words are memoised too)
                words.put(text, joined, len(text))
        for text, terms in new.items():
            memo.put(text, terms)
        found = [f if f is not None else new[t] for t, f in zip(texts, found)]
    return found  # type: ignore[return-value]


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


LOST_SHARE = 0.3  # of a query's terms the history holds, at least this share only a cut removed
QUESTION_TERMS = 16  # a message with more terms the history holds is not a question about a cut fact


def lost_terms(
    query: str,
    before: Sequence[str],
    after: Sequence[str],
    share: float = LOST_SHARE,
    question_terms: int = QUESTION_TERMS,
) -> bool:
    """Whether the query asks about what a cut removed: of its terms that some text of `before`
    holds, at least one, and at least `share` of them, are in no text of `after`. A question
    about a cut fact ("what is the rollback key of the zephyr cluster?") loses one of its few
    terms; a long message mostly about what is kept is not about the cut: an agent's tool-call
    error feedback (38 terms in the history, 5 of them only in cut results) or a tool's output
    that a text-based agent sends as a user message (33 terms, 7 cut). A verbose question whose
    one cut term is among many kept ones waits for the next crossing too. Terms are the
    query's BM25 terms, found as substrings of the whole lower-cased texts (no clipping: a fact
    can sit in the middle of a long result). A message with more than `question_terms` terms the
    history holds is a tool's output or pasted text, not a question about a cut fact (the outputs a
    text-based agent sends as user messages share 25-73 terms with its history, half of them cut;
    a question about a fact, 3-8)."""
    had = asked_terms(query, before, question_terms)
    return bool(had and lost_of(had, after, share))


def asked_terms(query: str, before: Sequence[str], question_terms: int = QUESTION_TERMS) -> frozenset[str]:
    """The query's terms that some text of `before` holds; none where it has more than
    `question_terms` of them (a tool's output or pasted text, not a question: see `lost_terms`)."""
    wanted = set(_terms([query])[0][1])
    if not wanted:
        return frozenset()
    texts = tuple(before)
    if len(wanted) > question_terms and _holds_more(wanted, texts, question_terms):
        return frozenset()  # (a long message: decided on the history's first texts, most often)
    words, joined = _vocabulary(texts)
    exact = wanted & words
    if len(exact) > question_terms:  # (a tool's output: decided without a substring search)
        return frozenset()
    had = exact | {t for t in wanted - exact if t in joined}
    return frozenset(had) if len(had) <= question_terms else frozenset()


def _holds_more(wanted: set[str], texts: tuple[str, ...], most: int) -> bool:
    """Whether `texts` hold more than `most` of the terms `wanted` as words, read a run of
    `_CHUNK` texts at a time from the start (the runs `_vocabulary` unions) and stopping once they
    do: a long message (an agent's observation, a pasted task) shares more than that with the
    first runs of its history, and the rest need not be read."""
    held: set[str] = set()
    for i in range(0, len(texts), _CHUNK):
        held |= wanted & _chunk_words(texts[i : i + _CHUNK])
        if len(held) > most:
            return True
    return False


def lost_of(had: frozenset[str], after: Sequence[str], share: float = LOST_SHARE) -> frozenset[str]:
    """Of the terms `had` (`asked_terms`), those in no text of `after`, where they are at least one
    and at least `share` of them; else none."""
    kept = [_words(text) for text in after]
    lost = frozenset(t for t in had if not any(t in words for words in kept))
    return lost if lost and len(lost) >= share * len(had) else frozenset()


def _words(text: str) -> str:
    """The distinct words of `text` in lower case, joined by a separator that is no word character,
    memoised (a carried cut's kept messages are judged again on every turn): a term is a substring
    of the text exactly where it is one of this (see `_vocabulary`)."""
    memo = current().text_words
    hit = memo.get(text)
    if hit is None:
        counts = current().term_counts
        terms, words = _read(text, terms=len(text) <= _DOC_CHARS and text not in counts, words=True)
        if terms is not None:  # (one pass read both: the terms are memoised too)
            counts.put(text, terms)
        hit = memo.put(text, words if words is not None else "", len(text))
    return hit


def _read(text: str, *, terms: bool, words: bool) -> tuple[tuple[int, dict[str, int]] | None, str | None]:
    """What `_terms` (`terms`) and `_words` (`words`) memoise of one text, each where asked for:
    BM25's terms of the text as clipped (bm25s's tokens, its stop words removed) and the whole
    text's distinct words. A text short enough not to be clipped gives both from one pass
    (its terms are its words of two characters or more: the callers ask for the other memo's part
    of such a text for free); a longer one, each from a pass of its own."""
    if len(text) > _DOC_CHARS:
        counted = _counted(Counter(_runs(_lowered(text))), text) if terms else None
        return counted, "\x00".join(set(_runs(text.lower()))) if words else None
    counts = Counter(_runs(_lowered(text)))  # (unclipped: the text in lower case)
    return (_counted(counts, text) if terms else None), ("\x00".join(counts) if words else None)


def _counted(counts: Counter[str], text: str) -> tuple[int, dict[str, int]]:
    """(number of terms, count per term) of a text's words (`counts`, of `text`) of two characters
    or more, its stop words left out: the tokens bm25s.tokenize's default pattern finds (each
    maximal run of two or more word characters), less its English stop words."""
    kept = dict(counts)  # (a dict's deletion is C code, a Counter's Python)
    for word in _dropped().intersection(kept):  # (walks the text's words, not every stop word)
        del kept[word]
    if not text.isascii():  # (a one-character word outside ASCII)
        for word in [w for w in kept if len(w) < 2]:
            del kept[word]
    return sum(kept.values()), kept


@functools.lru_cache(maxsize=1)
def _dropped() -> frozenset[str]:
    """The words no term is: the stop words, and every one-character ASCII word."""
    return _stopwords() | {chr(c) for c in range(128) if chr(c).isalnum() or chr(c) == "_"}


_WORD = re.compile(r"\w+")
# every ASCII character that is no word character (of `\w`: letters, digits, the underscore), to a space
_OTHERS = bytes(c for c in range(128) if not (chr(c).isalnum() or chr(c) == "_"))
_NOT_WORD = bytes.maketrans(_OTHERS, b" " * len(_OTHERS))


def _runs(text: str) -> list[str]:
    r"""The runs of word characters of `text`, in order: what `\w+` finds. An ASCII text (most of
    what agents send) has its other characters made spaces and is split, twice as fast as the
    regex (a cold fit of real agent turns reads ~1M characters of transcript lines this way)."""
    if text.isascii():
        return text.encode("ascii").translate(_NOT_WORD).decode("ascii").split()
    return _WORD.findall(text)


def _vocabulary(texts: tuple[str, ...]) -> tuple[frozenset[str], str]:
    """The words of `texts` in lower case (their runs of word characters), as a set and joined by
    a separator that is no word character, memoised (a turn asks about one history many times).
    A term (a run of word characters) is a substring of a text exactly where it is a substring of
    one of its words, so of the joined words: the same test as on the whole texts, on a string
    many times shorter."""
    memo = current().vocabularies
    hit = memo.get(texts)
    if hit is None:
        # (from each text's own words, memoised: the prefixes of one history share most of their
        # texts, and reading them all again cost a carried cut's replay a pass over each; and
        # in runs of `_CHUNK` texts from the start, memoised: the replay asks this of each past
        # prefix of a history, and the longer ones begin with the runs of the shorter)
        words = frozenset().union(*(_chunk_words(texts[i : i + _CHUNK]) for i in range(0, len(texts), _CHUNK)))
        hit = memo.put(texts, (words, "\x00".join(words)))
    return hit


_CHUNK = 64


def _chunk_words(texts: tuple[str, ...]) -> frozenset[str]:
    """The words `texts` hold (`_vocabulary`'s), memoised where they are a whole run."""
    chunks = current().vocabulary_chunks
    hit = chunks.get(texts)
    if hit is None:
        hit = frozenset("\x00".join(_words(text) for text in texts).split("\x00")) - {""}
        if len(texts) == _CHUNK:
            chunks.put(texts, hit, sum(map(len, texts)))
    return hit
