"""`context-guard agent-env`: coding agents told the window the guard enforces for their caller.

The numbers are checked against the guard itself: a request that fills the announced input with
the announced output reserved is sent uncut, and one just over it is cut."""

from __future__ import annotations

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli, the same parser
    import tomli as tomllib

from guard.core.announce import announce, lines
from guard.core.config import parse_config
from guard.fit.engine import Engine
from tests.cli_helpers import run_cli

CONFIG = """
model_list:
  - model_name: gw-coder
    litellm_params: {model: openai/gw-coder, api_base: "http://127.0.0.1:9/v1", api_key: dummy}
    model_info: {max_input_tokens: 65536, max_output_tokens: 16384}
  - model_name: claude-big
    litellm_params: {model: anthropic/claude-sonnet-4-5, api_key: dummy}
    model_info: {max_input_tokens: 200000, max_output_tokens: 64000}
context_guard:
  defaults: {max_output_tokens: 8192}
  teams:
    team-small: {context_window: 32768, max_output_tokens: 4096}
  keys:
    ci-bot: {max_output_tokens: 2048}
"""


def _engine() -> Engine:
    import yaml

    return Engine.from_guard_config(parse_config(yaml.safe_load(CONFIG)))


def _announced(model: str, team: str | None = None, key: str | None = None):
    engine = _engine()
    policy, _ = engine.policies.resolve((model, engine.underlying(model)), team=(team,), key=(key,))
    return engine, policy, announce(model, engine.limits_for(model, policy), policy)


def _count(engine: Engine, policy, words: int, max_tokens: int):
    """The guard's report for a chat body of `words` words reserving `max_tokens` (fitted or not)."""
    from guard.core.errors import ContextWindowExceeded

    body = {"model": "gw-coder", "messages": [{"role": "user", "content": "word " * words}], "max_tokens": max_tokens}
    try:
        return engine.fit(body, dialect="openai", policy=policy).report
    except ContextWindowExceeded as e:
        return e.report


def _largest_fitting(engine: Engine, policy, limit: int, max_tokens: int) -> int:
    """The most words whose count the guard holds at or under `limit`."""
    lo, hi = int(limit * 0.7), limit + 64  # "word " is one token, calibrated by at most 1.4x here
    assert (
        _count(engine, policy, lo, max_tokens).input_tokens_before
        <= limit
        < _count(engine, policy, hi, max_tokens).input_tokens_before
    )
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _count(engine, policy, mid, max_tokens).input_tokens_before <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


@pytest.mark.parametrize(
    ("team", "key", "window", "output"),
    [
        (None, None, 65536, 8192),  # the defaults' output cap
        ("team-small", None, 32768, 4096),  # a team's caps
        ("team-small", "ci-bot", 32768, 2048),  # and a key's on top
    ],
)
def test_the_announced_input_is_exactly_what_the_guard_sends_uncut(team, key, window, output):
    engine, policy, a = _announced("gw-coder", team, key)
    assert (a.window, a.max_output) == (window, output)
    assert a.input_limit == window - output - a.margin and a.agent_window == window - a.margin
    assert a.auto_compact < a.input_limit
    words = _largest_fitting(engine, policy, a.input_limit, a.max_output)
    at = _count(engine, policy, words, a.max_output)
    assert a.input_limit - 3 <= at.input_tokens_before <= a.input_limit  # a word is a token or two
    assert at.outcome == "unchanged" and at.max_tokens == a.max_output
    over = _count(engine, policy, words + 2, a.max_output)
    assert over.input_tokens_before > a.input_limit and over.outcome != "unchanged"


def test_claude_code_lines_use_the_window_variable_its_version_reads_for_the_name():
    _, _, unknown = _announced("gw-coder")
    text = lines(unknown, "claude-code", base_url="http://127.0.0.1:4000")
    assert f"export CLAUDE_CODE_MAX_CONTEXT_TOKENS={unknown.agent_window}" in text
    assert (
        "export CLAUDE_CODE_MAX_OUTPUT_TOKENS=8192" in text
        and "export ANTHROPIC_BASE_URL=http://127.0.0.1:4000" in text
    )
    _, _, claude = _announced("claude-big")  # Claude Code knows claude-* windows: its auto-compact window lowers it
    assert f"export CLAUDE_CODE_AUTO_COMPACT_WINDOW={claude.agent_window}" in lines(claude, "claude-code")
    _, _, small = _announced("claude-big", "team-small")  # under its 100k minimum: said, not exported
    text = lines(small, "claude-code")
    assert not any("AUTO_COMPACT_WINDOW=" in line or "MAX_CONTEXT_TOKENS=" in line for line in text)
    assert any(line.startswith("# Claude Code reads an auto-compact window below") for line in text)


def test_codex_lines_are_valid_config_toml(tmp_path):
    _, _, a = _announced("gw-coder", "team-small")
    parsed = tomllib.loads("\n".join(lines(a, "codex", base_url="http://gw:4000/")))
    assert parsed["model"] == "gw-coder" and parsed["model_provider"] == "context-guard"
    assert parsed["model_context_window"] == a.agent_window
    assert parsed["model_auto_compact_token_limit"] == a.auto_compact
    assert parsed["model_max_output_tokens"] == 4096
    provider = parsed["model_providers"]["context-guard"]
    assert provider["base_url"] == "http://gw:4000/v1" and provider["wire_api"] == "responses"


def test_the_cli_prints_them_and_refuses_what_it_cannot_resolve(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(CONFIG)
    _, _, a = _announced("gw-coder", "team-small", "ci-bot")
    status, out, _, _ = run_cli(
        "agent-env",
        "claude-code",
        "--config",
        str(cfg),
        "--model",
        "gw-coder",
        "--team",
        "team-small",
        "--key-alias",
        "ci-bot",
    )
    assert status == 0 and f"export CLAUDE_CODE_MAX_CONTEXT_TOKENS={a.agent_window}\n" in out
    status, _, err, _ = run_cli("agent-env", "codex", "--config", str(cfg), "--model", "nobody-knows-this-model")
    assert status == 1 and "nobody-knows-this-model" in err
    status, _, err, _ = run_cli("agent-env", "cursor", "--config", str(cfg), "--model", "gw-coder")
    assert status == 1 and "invalid choice" in err
