"""`context-guard agent-env`: coding agents told the window the guard enforces for their caller.

The numbers are checked against the guard itself: a request that fills the announced input with
the announced output reserved is sent uncut, and one just over it is cut."""

from __future__ import annotations

import json

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli, the same parser
    import tomli as tomllib

from guard.core.announce import (
    AUTO_COMPACT_SHARE,
    OPENCODE_OUTPUT_TOKEN_MAX,
    QWEN_CODE_COMPACT_RESERVE,
    QWEN_CODE_COMPACT_SHARE,
    Announced,
    announce,
    lines,
)
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
    _, _, factor = engine.counter_and_factor(model, policy)
    return engine, policy, announce(model, engine.limits_for(model, policy), policy, factor.value)


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
    assert a.input_limit == window - output - a.margin
    # the agent is told the provider's tokens: the guard counts this model (no tokenizer of its own) x1.2
    assert a.factor == 1.2 and a.agent_input == int(a.input_limit / 1.2)
    assert a.agent_window == a.agent_input + output and a.auto_compact < a.agent_input
    words = _largest_fitting(engine, policy, a.input_limit, a.max_output)
    at = _count(engine, policy, words, a.max_output)
    assert a.input_limit - 3 <= at.input_tokens_before <= a.input_limit  # a word is a token or two
    assert at.outcome == "unchanged" and at.max_tokens == a.max_output
    # an agent whose provider counts as the guard's tokenizer does reports agent_input for that request
    assert abs(at.input_tokens_before / a.factor - a.agent_input) <= 3
    over = _count(engine, policy, words + 2, a.max_output)
    assert over.input_tokens_before > a.input_limit and over.outcome != "unchanged"


def test_a_factor_under_one_never_tells_an_agent_more_than_the_guard_allows():
    """A learned factor under 1 (the provider counts less than the guard's stand-in) already puts
    the guard's count in about the provider's tokens: the agent gets the guard's own input limit."""
    under = Announced("m", window=65_536, max_output=8_192, margin=655, input_limit=56_689, factor=0.8)
    over = Announced("m", window=65_536, max_output=8_192, margin=655, input_limit=56_689, factor=1.25)
    assert under.agent_input == 56_689 and over.agent_input == int(56_689 / 1.25)
    assert under.agent_window == 56_689 + 8_192 and under.auto_compact < under.agent_input


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


def test_opencode_gets_an_opencode_json_that_compacts_at_the_announced_point():
    _, _, a = _announced("gw-coder", "team-small")
    config = json.loads("\n".join(lines(a, "opencode", base_url="http://gw:4000/")))
    assert config["model"] == "context-guard/gw-coder"
    provider = config["provider"]["context-guard"]
    assert provider["npm"] == "@ai-sdk/openai-compatible" and provider["options"]["baseURL"] == "http://gw:4000/v1"
    assert provider["options"]["apiKey"] == "{env:LITELLM_API_KEY}" and provider["options"]["includeUsage"] is True
    limit = provider["models"]["gw-coder"]["limit"]
    assert limit["output"] == a.max_output == 4096
    # OpenCode compacts once a turn's tokens reach its context limit less the output it asks for
    # (at most OPENCODE_OUTPUT_TOKEN_MAX): that is the announced auto-compact point
    assert limit["context"] - min(limit["output"], OPENCODE_OUTPUT_TOKEN_MAX) == a.auto_compact
    big = Announced("big", window=200_000, max_output=64_000, margin=2_000, input_limit=134_000, factor=1.25)
    limit = json.loads("\n".join(lines(big, "opencode")))["provider"]["context-guard"]["models"]["big"]["limit"]
    assert limit["output"] == 64_000 > OPENCODE_OUTPUT_TOKEN_MAX  # (OpenCode asks for 32,000 of it)
    assert limit["context"] - OPENCODE_OUTPUT_TOKEN_MAX == big.auto_compact == int(134_000 / 1.25 * AUTO_COMPACT_SHARE)


def _qwen_trigger(settings: dict) -> float:
    """Where Qwen Code (0.24) compacts: the smaller of its threshold's share of the window and the
    window less its reserve for the summary request."""
    window = settings["model"]["generationConfig"]["contextWindowSize"]
    return min(settings["context"]["autoCompactThreshold"] * window, window - QWEN_CODE_COMPACT_RESERVE)


def test_qwen_code_gets_a_settings_json_that_compacts_at_its_share_of_the_input():
    """A small window (the reserve Qwen Code keeps for its summary request would put its trigger
    under the share): the window it is told is raised so that the trigger lands there; every request
    reserves the guard's output cap; the files it puts back after compacting are kept to a quarter of
    the input. A large window: the agent's own window, and the files left at Qwen Code's default."""
    _, _, a = _announced("gw-coder", "team-small")
    settings = json.loads("\n".join(lines(a, "qwen-code", base_url="http://gw:4000/")))
    assert settings["security"]["auth"] == {"selectedType": "openai", "baseUrl": "http://gw:4000/v1"}
    model = settings["model"]
    assert model["name"] == "gw-coder" and model["generationConfig"]["samplingParams"]["max_tokens"] == a.max_output
    assert model["generationConfig"]["contextWindowSize"] > a.agent_window
    assert abs(_qwen_trigger(settings) - a.agent_input * QWEN_CODE_COMPACT_SHARE) <= 1
    assert model["chatCompression"]["maxRecentFilesToRetain"] * 5_000 <= a.agent_input / 4
    big = Announced("big", window=200_000, max_output=64_000, margin=2_000, input_limit=134_000, factor=1.25)
    settings = json.loads("\n".join(lines(big, "qwen-code")))
    assert settings["model"]["generationConfig"]["contextWindowSize"] == big.agent_window
    assert abs(_qwen_trigger(settings) - big.agent_input * QWEN_CODE_COMPACT_SHARE) <= 1
    assert "chatCompression" not in settings["model"] and settings["security"]["auth"]["baseUrl"].endswith(":4000/v1")


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
    status, out, _, _ = run_cli("agent-env", "qwen-code", "--config", str(cfg), "--model", "gw-coder")
    assert status == 0 and json.loads(out)["model"]["name"] == "gw-coder"
    status, _, err, _ = run_cli("agent-env", "cursor", "--config", str(cfg), "--model", "gw-coder")
    assert status == 1 and "invalid choice" in err
