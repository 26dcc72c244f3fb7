"""Chat's own `groups` (ids read inline, for speed) against the generic `Dialect.groups`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from guard.dialects import OPENAI
from guard.dialects.base import Dialect

ids = st.sampled_from(["a", "b", "c", ""])
call = st.fixed_dictionaries({"id": ids, "type": st.just("function")})
message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "developer"]), "content": st.just("x")}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.none()},
        optional={"tool_calls": st.one_of(st.lists(st.one_of(call, st.just("odd")), max_size=3), st.just("odd"))},
    ),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["tool", "function"]), "content": st.just("r")},
        optional={"tool_call_id": st.one_of(ids, st.none()), "name": ids},
    ),
)


@given(st.lists(message, max_size=30))
def test_chat_groups_are_the_generic_groups(messages):
    assert OPENAI.groups(messages) == Dialect.groups(OPENAI, messages)


def test_a_call_and_its_results_share_a_group_and_a_stray_result_stands_alone():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "tool", "tool_call_id": "z", "content": "stray"},
        {"role": "assistant", "content": "done"},
    ]
    assert OPENAI.groups(messages) == [0, 1, 1, 1, 2, 3]


def test_a_past_request_ends_between_two_replies_only_where_the_client_sends_histories_ending_with_one():
    """Where a request may have been sent (`turn_boundaries`): never right after the model's reply,
    but a history that itself ends with a reply (CrewAI's ReAct loop: the observation goes as an
    assistant message after the action) may have been sent between any two replies before."""
    from guard.dialects import turn_boundaries

    task = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    steps = [{"role": "assistant", "content": f"{kind} {i}"} for i in range(3) for kind in ("Action:", "Observation:")]
    assert turn_boundaries(OPENAI, task + steps) == ([1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7])
    # the same steps in a history that ends with the client's words: no request ended after a reply
    asked = [*task, *steps, {"role": "user", "content": "next"}]
    assert turn_boundaries(OPENAI, asked) == ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2])
    # a reply followed by the client's words ends no request, even where the history ends with a reply
    prefilled = [*task, {"role": "assistant", "content": "done"}, {"role": "user", "content": "go"}, steps[0]]
    assert turn_boundaries(OPENAI, prefilled)[1] == [1, 2, 4]
