"""Relevance-aware cutting: what the last user message asks about is cut last."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import needle
from guard.core import relevance
from guard.core.config import Deployment
from guard.core.policy import load_policy_set
from guard.fit.engine import Engine


def test_bm25_ranks_the_document_the_question_is_about():
    docs = ["pytest output: 40 passed", "the rollback key for the helix deployment is Q123-4567", "def main(): pass"]
    scores = relevance.scores("what is the rollback key for helix?", docs)
    assert scores.index(max(scores)) == 1
    assert relevance.relevant(scores) == {1}


def test_no_overlap_means_nothing_is_relevant():
    assert relevance.relevant(relevance.scores("zebra", ["apple pie", "banana"])) == set()
    assert relevance.scores("", ["x"]) == [0.0]


def _fitted(body, mode: str, window: int) -> str:
    engine = Engine(
        load_policy_set({"defaults": {"relevance": mode, "safety_margin_tokens": 1024, "safety_margin_ratio": 0.0}}),
        deployments={"half": Deployment("half", "gpt-4o", {"max_input_tokens": window, "max_output_tokens": 4096})},
        model_map=None,
    )
    fitted = engine.fit(json.loads(json.dumps(body)), model="half")
    return json.dumps(fitted.body["messages"][:-1], ensure_ascii=False)


def test_a_planted_fact_survives_with_relevance_where_oldest_first_loses_it():
    wins = 0
    for seed in range(6):
        body, value = needle.case(seed)
        size = Engine(model_map=None).fit(body, model="gpt-4o").report.input_tokens_before
        window = size // 4 + 4096 + 1024
        with_relevance = value in _fitted(body, "bm25", window)
        oldest_first = value in _fitted(body, "off", window)
        assert with_relevance or not oldest_first  # relevance never loses a fact oldest-first keeps
        wins += with_relevance and not oldest_first
    assert wins >= 2


def test_a_new_turn_does_not_reorder_the_cut_of_the_older_history():
    """Relevance is scored among the history in whole bands: a new result that matches the
    question far better than the older ones (its score would raise the bar of what counts as
    relevant) changes nothing in how the older history is cut until the history grows by a band,
    so the previous turn's fitted prompt is still a prefix (the provider's cache holds)."""
    from tests.test_strategies import agent, engine, words

    weak = [words(150, i) + (" rollback notes" if i % 2 else "") for i in range(12)]
    body = agent(weak, last_user="which rollback key for the orion deployment?")
    strong = "rollback key orion deployment: the orion rollback key is K-42 " * 3
    turn = json.loads(json.dumps(body))
    turn["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "n1", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "n1", "content": strong},
    ]
    total = engine(100_000).fit(body).report.input_tokens_before
    guard = engine(total * 4 // 5, strategies=["truncate_tool_results"], keep_recent_groups=1)
    first, second = guard.fit(body), guard.fit(turn)
    assert first.report.actions and second.report.actions
    before, after = first.body["messages"], second.body["messages"]
    assert after[: len(before)] == before
    assert second.report.cut == first.report.cut


def test_relevance_still_orders_the_cut_when_the_tools_make_the_overflow():
    """The banded corpus is measured in the messages' own tokens; when the tool schemas (counted
    outside the messages) are what pushes a request over its room, the messages all stay scored."""
    from guard.fit.history import History

    def settled_end(counts: tuple[int, ...]) -> int:
        return History(counts=counts).settled_end(target=1000, band=350)

    assert settled_end((100, 200, 300)) == 2  # below the mark: every message is scored
    assert settled_end((600, 500, 300)) == 1  # 1,400 tokens: scored up to 1,000 + one band
    assert settled_end((600, 500, 300, 40)) == 1  # a new message within the band changes nothing
    assert settled_end((600, 500, 300, 400)) == 2  # one past the next band (1,700) moves it


def test_band_edges_are_the_low_water_mark_then_whole_bands():
    from guard.fit.history import History

    history = History(counts=(600, 300, 200, 300, 300, 40))  # cumulative 600, 900, 1100, 1400, 1700, 1740
    assert history.band_edges(target=1000, band=350) == (
        1,
        2,
        4,
    )  # <= 1,000, <= 1,350, <= 1,700 (1,740 is within its band)
    assert History(counts=(100, 200)).band_edges(target=1000, band=350) == (1,)  # below the mark: one band, everything


_WORDS = ["rollback", "key", "helix", "deploy", "orion", "alpha", "beta", "gamma", "delta", "log", "error", "the", "is"]
_doc = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(_doc, min_size=1, max_size=12),
    query=st.lists(st.sampled_from(_WORDS[:6]), min_size=1, max_size=4).map(" ".join),
)
def test_scores_are_bm25s_scores(docs, query):
    """The guard scores from memoised term counts; the numbers are those of a bm25s index built on
    the same documents (every doc here shares a term with the query, so no length is estimated)."""
    import bm25s

    docs = [d + " " + query.split()[0] for d in docs]
    ours = relevance.scores(query, docs)
    tokens = bm25s.tokenize(docs, stopwords="en", show_progress=False)
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    terms = [t for t in dict.fromkeys(query.split()) if t in tokens.vocab and t not in ("the", "is")]
    theirs = index.get_scores([tokens.vocab[t] for t in terms]) if terms else [0.0] * len(docs)
    assert ours == pytest.approx([float(x) for x in theirs], rel=1e-5, abs=1e-6)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200) | st.text(alphabet="ab_1 -.é東\n\t'", max_size=60))
def test_terms_are_bm25s_tokens(text):
    """The guard's terms are the tokens bm25s's default pattern finds: its runs of word characters
    of two or more, and those runs are what `\\w+` finds (an ASCII text is split, not matched)."""
    import inspect
    import re

    from bm25s.tokenization import tokenize

    pattern = inspect.signature(tokenize).parameters["token_pattern"].default
    runs = relevance._runs(text)
    assert runs == re.findall(r"\w+", text)
    assert [r for r in runs if len(r) >= 2] == re.findall(pattern, text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_an_ascii_texts_runs_are_the_regex_runs(text):
    """Every ASCII character, word or not (controls, punctuation, the whitespace str.split knows):
    the split path finds the runs `\\w+` finds."""
    import re

    assert text.isascii()
    assert relevance._runs(text) == re.findall(r"\w+", text)


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(_doc, min_size=2, max_size=16),
    more=st.lists(_doc, min_size=1, max_size=8),
    cut=st.integers(1, 15),
    query=st.lists(st.sampled_from(_WORDS[:6]), min_size=1, max_size=3).map(" ".join),
)
def test_a_whole_band_keeps_its_verdicts_whatever_comes_after_it(docs, more, cut, query):
    cut = min(cut, len(docs) - 1)
    ends = [cut, len(docs)]
    before = relevance.relevant_in_bands(query, docs, ends)
    # each band is judged as the relevant set of its own prefix, restricted to the band
    expect = {i for i in relevance.relevant(relevance.scores(query, docs[:cut]))} | {
        i for i in relevance.relevant(relevance.scores(query, docs)) if i >= cut
    }
    assert before == expect
    after = relevance.relevant_in_bands(query, docs + more, ends + [len(docs) + len(more)])
    assert {i for i in after if i < len(docs)} == before


def test_earlier_copies_of_the_question_are_not_what_it_is_about():
    """Agent frameworks resend the same nudge ("please proceed") as a user turn: its earlier copies
    would match it best and set the bar of what counts as relevant. They are not candidates; the
    messages that share its terms are."""
    from guard.dialects import OPENAI
    from guard.fit import summary
    from guard.fit.questions import relevant_origins as _relevant_origins

    nudge = "Please proceed to the next step using your best judgement."
    messages: tuple[dict, ...] = (
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Find the flag on this machine."},
        {"role": "assistant", "content": "Listing the home directory."},
        {"role": "user", "content": nudge},
        {"role": "assistant", "content": "Next step: decode the cipher, my best guess is a Vigenere key."},
        {"role": "assistant", "content": "Unrelated build output, 40 passed."},
        {"role": "user", "content": nudge},
    )
    transcript = summary.transcript(OPENAI, messages)
    hot = _relevant_origins(OPENAI, messages, lambda: transcript, frozenset(), (len(messages) - 1,))
    assert hot == {4}


def test_a_question_about_a_cut_fact_swaps_the_cut_but_a_tool_output_sent_as_user_text_does_not():
    """Issue 34: a text-based agent sends each tool's output as a user message; one that shares many
    terms with the history (25-73 in real loops, half of them in cut results) is not a question about
    a cut fact, so it does not re-cut a carried prefix (a prompt-cache break) the way a question does."""
    before = [
        "the rollback key for the helix deployment is Q123-4567",
        *(f"tests/test_mod{i}.py::test_case_{i} PASSED in module_{i} with fixture_{i}" for i in range(20)),
    ]
    after = ["def main(): pass"]
    assert relevance.lost_terms("what is the rollback key for helix?", before, after)
    output = "\n".join(f"tests/test_mod{i}.py::test_case_{i} PASSED" for i in range(20))
    assert not relevance.lost_terms(output, before, after)  # 40 terms of the history, all cut: an output
    assert relevance.lost_terms(output, before, after, question_terms=100)  # counted as a question, it would swap


@given(
    st.lists(st.text(alphabet="ab_ .é\n-1", max_size=30), max_size=6),
    st.text(alphabet="ab_é1", min_size=2, max_size=4),
)
def test_a_term_is_held_by_a_history_exactly_where_one_of_its_texts_holds_it(texts, term):
    """`lost_terms` finds a query's terms in a history by its words (memoised once a history),
    and in the messages a cut keeps by each one's words (memoised a text): the same answer as a
    search of every text."""
    from guard.core.relevance import _vocabulary, _words

    words, joined = _vocabulary(tuple(texts))
    held = any(term in text.lower() for text in texts)
    assert (term in words or term in joined) == held
    assert any(term in _words(text) for text in texts) == held


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60), max_size=8))
def test_a_historys_vocabulary_is_built_from_its_texts_words(texts):
    """`_vocabulary` unions each text's memoised words (a carried cut's replay asks about many
    prefixes of one history): the same words, and the same substring answers, as one pass of the
    word pattern over the texts joined."""
    from guard.core.relevance import _WORD, _vocabulary

    words, joined = _vocabulary(tuple(texts))
    expected = frozenset(_WORD.findall("\x00".join(texts).lower()))
    assert words == expected
    assert sorted(joined.split("\x00")) == sorted(expected) or (not expected and joined == "")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="abcé_ 1\n.", max_size=12), min_size=65, max_size=300),
    st.lists(st.integers(0, 300), min_size=1, max_size=6),
    st.integers(0, 299),
)
def test_the_vocabularies_of_a_historys_prefixes_are_their_own_words_in_any_order(texts, ends, edited):
    """A replay asks for the vocabulary of several prefixes of one history, in any order; each is
    built from memoised runs of 64 texts from the start (`_chunk_words`), which the longer prefixes
    share with the shorter, and an engine serves other conversations (here: the same history with
    one text edited) from the same memos: every answer is that prefix's own words."""
    from guard.core import memo
    from guard.core.relevance import _WORD, _vocabulary

    other = list(texts)
    other[edited % len(texts)] += " zzz"
    with memo.using(memo.Memos()):
        for end in ends:
            for history in (texts, other):
                prefix = tuple(history[:end])
                words, joined = _vocabulary(prefix)
                expected = frozenset(_WORD.findall("\x00".join(prefix).lower()))
                assert words == expected
                assert set(joined.split("\x00")) - {""} == expected


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)
    | st.text(alphabet="ab_1 -.é東\n\tİ'", max_size=80)
    | st.builds(lambda w, n: (w + " ") * n, st.sampled_from(["the", "a", "helix", "Q1"]), st.integers(2, 4000)),
    st.booleans(),
)
def test_a_texts_terms_and_words_are_the_same_whichever_is_read_first(text, terms_first):
    """One pass reads a short text's BM25 terms and its words for both memos (`_read`):
    each is what its own pass gives (bm25s's tokens of the clipped text less its stop words; the
    whole text's distinct words), whichever of the two was asked for first."""
    import re
    from collections import Counter

    from guard.core import memo
    from guard.core.relevance import _WORD, _clip, _stopwords, _terms, _words

    with memo.using(memo.Memos()):
        if terms_first:
            terms, words = _terms([text])[0], _words(text)
        else:
            words, terms = _words(text), _terms([text])[0]
    expected = Counter(t for t in re.findall(r"\w\w+", _clip(text).lower()) if t not in _stopwords())
    assert terms == (sum(expected.values()), dict(expected))
    assert set(words.split("\x00")) - {""} == set(_WORD.findall(text.lower()))


_STEMS = ["deploy", "deployment", "roll", "rollback", "key", "keys", "helix", "log", "logs", "the", "a"]


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(_STEMS), min_size=1, max_size=10).map(" ".join), min_size=1, max_size=10),
    query=st.lists(st.sampled_from(_STEMS), min_size=1, max_size=3).map(" ".join)
    | st.lists(st.sampled_from(_STEMS), min_size=20, max_size=40).map(
        lambda w: " ".join(f"{x}{i}" for i, x in enumerate(w)) + " deploy"
    ),
    read=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_scores_do_not_depend_on_which_texts_were_read_before(docs, query, read):
    """A worker that read some of the texts before (their terms memoised by another turn, another
    question, or the notes' word lists) scores them as a fresh one does: the docs that hit are
    those holding a question's term as a substring ("deploy" in "deployment"), however short or
    long the question (a long one has every doc read first)."""
    from guard.core import memo

    with memo.using(memo.Memos()):
        fresh = relevance.scores(query, docs)
    with memo.using(memo.Memos()):
        for doc, first in zip(docs, read):
            if first:
                relevance._terms([doc])
        warm = relevance.scores(query, docs)
    assert warm == fresh


_TERMS = [f"t{i}" for i in range(40)]


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(_TERMS), max_size=4).map(" ".join), max_size=200),
    query=st.lists(st.sampled_from(_TERMS), min_size=1, max_size=40).map(" ".join),
    most=st.integers(0, 24),
)
def test_the_terms_a_question_asks_are_those_its_history_holds_up_to_the_limit(texts, query, most):
    """`asked_terms` stops reading a long question's history once the texts read hold more than
    `question_terms` of its terms (runs of 64 texts from the start): the same answer as reading the
    whole history, its terms held as words or as substrings of a word, or none past the limit."""
    from guard.core import memo

    wanted = set(query.split())
    words = {w for text in texts for w in text.split()}
    held = {t for t in wanted if any(t in w for w in words)}
    exact = wanted & words
    expected = frozenset() if len(exact) > most or len(held) > most else frozenset(held)
    with memo.using(memo.Memos()):
        assert relevance.asked_terms(query, texts, most) == expected
