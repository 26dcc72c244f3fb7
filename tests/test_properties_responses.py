"""The guard's invariants (tests/test_properties.py) on OpenAI Responses API bodies: every
property test of the chat and /v1/messages dialects, run again on generated `input` item lists
(messages with input_text / output_text parts or strings, reasoning items with encrypted content,
function_call / function_call_output pairs, `instructions`, `max_output_tokens`), with the
profile's full number of examples each."""

from __future__ import annotations

from hypothesis import given

from tests import test_properties as chat
from tests.strategies import request_body

RESPONSES = request_body(dialects=("responses",))
# Anthropic-only properties (text next to tool results, cache_control breakpoints) have no
# counterpart here (# the Responses API has neither), and the long-loop properties, whose own generator draws Responses
# bodies already
_SKIP = {
    "test_tool_results_with_text_blocks_fit_as_readily_as_without",
    "test_cache_breakpoints_move_onto_markers_and_never_multiply",
    "test_a_last_message_of_tool_results_and_text_is_cut_before_it_is_refused",
    "test_a_long_loop_whose_turns_must_go_keeps_its_cut_between_crossings",
    "test_a_loop_that_follows_its_results_with_its_own_message_keeps_its_cut_between_crossings",
}

for _name in dir(chat):
    _test = getattr(chat, _name)
    if not _name.startswith("test_") or _name in _SKIP or not hasattr(_test, "hypothesis"):
        continue
    globals()[_name] = given(RESPONSES)(_test.hypothesis.inner_test)
