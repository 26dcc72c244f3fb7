"""The one memo kind: bounded, the oldest entry forgotten first."""

from __future__ import annotations

import pytest

from guard.core.memo import Memo, bounded_put


def test_a_memo_forgets_its_oldest_entry_first():
    memo: Memo[str, int] = Memo(3)
    for i, key in enumerate("abcd"):
        assert memo.put(key, i) == i
    assert len(memo) == 3 and "a" not in memo and memo.get("d") == 3 and memo.get("a") is None
    memo.put("b", 10)  # a key already held replaces its value, and nothing is evicted
    assert len(memo) == 3 and memo.get("b") == 10 and memo.get("c") == 2


def test_a_memo_holds_at_least_one_entry():
    with pytest.raises(ValueError):
        Memo(0)


def test_bounded_put_evicts_the_same_way():
    store: dict[str, int] = {}
    for i, key in enumerate("abcd"):
        bounded_put(store, key, i, 3)
    assert list(store) == ["b", "c", "d"]
    bounded_put(store, "c", 9, 3)  # a key already held: replaced in place, nothing evicted
    assert store == {"b": 1, "c": 9, "d": 3}
