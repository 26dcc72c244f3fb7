"""What the guard enforces for one model and caller, in the terms coding agents read.

An agent that knows the window compacts on its own, with its own summarizer, before the guard
must cut. The numbers are the guard's after policy (defaults < model < team < key):

- `window`: the model's context window as the guard holds it (policy caps applied);
- `max_output`: the output cap (the model's, lowered by `max_output_tokens`);
- `margin`: the safety margin the guard keeps free;
- `input_limit`: the most input a request reserving `max_output` may carry (the budget's room),
  as the guard counts it;
- `factor`: the calibration factor the guard counts this model with (1.0 where it has the model's
  own tokenizer; see `guard.core.calibration`);
- `agent_input`: `input_limit` in the provider's tokens, `input_limit / factor`: agents compact on
  the usage the provider reports, which the guard's count of a model it estimates exceeds by up to
  its factor (an agent told the guard's own figure for a model counted at x1.2 would be cut before
  it compacts). Exact where the provider's tokenizer counts as the guard's stand-in does, early
  where it counts more, or where the factor was learned (a high quantile of what was billed, plus
  headroom); a factor under 1 (learned where the provider counts less) leaves it at `input_limit`,
  which the guard's count already puts in about the provider's tokens;
- `agent_window`: the window to tell an agent, `agent_input + max_output`: an agent that keeps its
  input plus its output under it is never cut;
- `auto_compact`: where to make an agent compact, 15% below `agent_input`, so one turn's new
  results do not push the request past it.

`lines(announced, agent, ...)` renders them for Claude Code (shell exports), Codex (config.toml),
OpenCode (opencode.json) or Qwen Code (its settings.json).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from guard.core.budget import make_budget
from guard.core.limits import ModelLimits
from guard.core.policy import Policy

AGENTS = ("claude-code", "codex", "opencode", "qwen-code")
# Claude Code's CLAUDE_CODE_AUTO_COMPACT_WINDOW is read as at least this many tokens (2.1.331)
CLAUDE_CODE_MIN_AUTO_COMPACT_WINDOW = 100_000
# where an agent is made to compact, as a share of the input it may send: the rest must hold the
# turn that crosses it (OpenCode's read tool numbers each line: a 3.4k-token file reads as 5.9k, 12%
# of a 64k window's input, which a tenth did not hold: bench.agents)
AUTO_COMPACT_SHARE = 0.85
# OpenCode asks for at most this many output tokens, whatever a model's `limit.output` (its
# OUTPUT_TOKEN_MAX, 1.18), and compacts once a turn's reported tokens reach its context limit less
# that request's output: `limit.context` is set so that this happens at `auto_compact`
OPENCODE_OUTPUT_TOKEN_MAX = 32_000
# Qwen Code (0.24) compacts once its estimate of the next request (the last reported prompt and
# output tokens, plus the new message's characters / 4) reaches the smaller of
# `context.autoCompactThreshold` times its window and the window less this reserve (the 20,000
# output of its summary request and a 13,000 buffer)
QWEN_CODE_COMPACT_RESERVE = 33_000
# where Qwen Code is made to compact, as a share of the input it may send: its compaction request
# carries the newest result on top of a history its estimate put under the trigger (a numbered file
# read counts more tokens than its characters / 4), so it lands up to two results past the trigger
# (bench.agents: at 85% of a 64k window's input its compaction requests went out 1.03x over it)
QWEN_CODE_COMPACT_SHARE = 0.75
# after compacting, Qwen Code puts back the files it read last (up to 5, ~20 KB each, about this
# many tokens): in a small window they are kept to a quarter of the input, or it compacts again at once
QWEN_CODE_RESTORED_FILE_TOKENS = 5_000
QWEN_CODE_RESTORED_FILES = 5


@dataclass(frozen=True)
class Announced:
    model: str
    window: int
    max_output: int
    margin: int
    input_limit: int
    factor: float = 1.0

    @property
    def agent_input(self) -> int:
        return int(self.input_limit / max(1.0, self.factor))

    @property
    def agent_window(self) -> int:
        return self.agent_input + self.max_output

    @property
    def auto_compact(self) -> int:
        return int(self.agent_input * AUTO_COMPACT_SHARE)


def announce(model: str, limits: ModelLimits, policy: Policy, factor: float = 1.0) -> Announced:
    """The limits one caller gets for `model` (its policy already resolved for the caller), the
    guard counting it with calibration `factor`."""
    budget, _ = make_budget(
        limits, policy, limits.max_output_tokens
    )  # the whole output cap reserved (clamped to the policy's)
    return Announced(
        model=model,
        window=limits.context_window,
        max_output=budget.reserved_output,
        margin=budget.margin,
        input_limit=max(0, budget.room),
        factor=factor if factor > 0 else 1.0,
    )


def lines(announced: Announced, agent: str, *, base_url: str | None = None) -> list[str]:
    """The settings that tell `agent` the guard's limits: shell `export` lines for Claude Code,
    config.toml lines for Codex (comments say where each number comes from), an opencode.json for
    OpenCode (JSON has no comments: the provider's name says it)."""
    a = announced
    head = (
        f"window {a.window:,}, output cap {a.max_output:,}, safety margin {a.margin:,}: "
        f"input up to {a.input_limit:,} with the whole output reserved"
    )
    if a.factor > 1.0:
        head += f" (counted x{a.factor:g}: {a.agent_input:,} of the provider's tokens)"
    if agent == "claude-code":
        out = [f"# context-guard: {a.model}: {head}"]
        if base_url:
            out.append(f"export ANTHROPIC_BASE_URL={base_url}")
        out += [f"export ANTHROPIC_MODEL={a.model}", f"export CLAUDE_CODE_MAX_OUTPUT_TOKENS={a.max_output}"]
        if a.model.startswith("claude-"):
            # Claude Code knows claude-* windows from its own catalog; only its auto-compact
            # window (at least 100k tokens) lowers where it compacts
            if a.agent_window >= CLAUDE_CODE_MIN_AUTO_COMPACT_WINDOW:
                out.append(f"export CLAUDE_CODE_AUTO_COMPACT_WINDOW={a.agent_window}")
            else:
                out.append(
                    f"# Claude Code reads an auto-compact window below {CLAUDE_CODE_MIN_AUTO_COMPACT_WINDOW:,} as "
                    f"{CLAUDE_CODE_MIN_AUTO_COMPACT_WINDOW:,}: serve this model under a name that does not start "
                    "with claude- so the window below applies, or the guard will cut"
                )
        else:
            out.append(f"export CLAUDE_CODE_MAX_CONTEXT_TOKENS={a.agent_window}")
        return out
    if agent == "codex":
        out = [
            f"# context-guard: {a.model}: {head}",
            f'model = "{a.model}"',
            'model_provider = "context-guard"',
            f"model_context_window = {a.agent_window}",
            f"model_auto_compact_token_limit = {a.auto_compact}",
            f"model_max_output_tokens = {a.max_output}",
            "",
            "[model_providers.context-guard]",
            'name = "LiteLLM proxy with context-guard"',
            f'base_url = "{_v1(base_url)}"',
            'env_key = "LITELLM_API_KEY"',
            'wire_api = "responses"',
        ]
        return out
    if agent == "opencode":
        return _opencode(a, head, base_url).splitlines()
    if agent == "qwen-code":
        return _qwen_code(a, head, base_url).splitlines()
    raise ValueError(f"unknown agent {agent!r}: one of {', '.join(AGENTS)}")


def _opencode(a: Announced, head: str, base_url: str | None) -> str:
    """An opencode.json whose provider is the proxy: OpenCode compacts once a turn's tokens reach
    `limit.context` less the output it asks for (the smaller of `limit.output` and
    `OPENCODE_OUTPUT_TOKEN_MAX`), so the context limit is `auto_compact` plus that output; every
    request it sends then reserves at most the guard's output cap."""
    asked = min(a.max_output, OPENCODE_OUTPUT_TOKEN_MAX)
    model = {"name": a.model, "limit": {"context": a.auto_compact + asked, "output": a.max_output}}
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": f"context-guard/{a.model}",
        "provider": {
            "context-guard": {
                "npm": "@ai-sdk/openai-compatible",
                "name": f"LiteLLM proxy with context-guard: {a.model}: {head}",
                "options": {
                    "baseURL": _v1(base_url),
                    "apiKey": "{env:LITELLM_API_KEY}",
                    "includeUsage": True,  # (the usage it compacts on, in the stream's last chunk)
                },
                "models": {a.model: model},
            }
        },
    }
    return json.dumps(config, indent=2)


def _qwen_code(a: Announced, head: str, base_url: str | None) -> str:
    """A Qwen Code settings.json (`~/.qwen/settings.json`, or `$QWEN_HOME`'s) whose provider is the
    proxy (the key from `OPENAI_API_KEY`): every request reserves the guard's output cap, and it
    compacts at `QWEN_CODE_COMPACT_SHARE` of the input. Its trigger is the smaller of the
    threshold's share of the window and the window less `QWEN_CODE_COMPACT_RESERVE`, so where the
    agent's window leaves less than that reserve above the trigger, the window it is told is the
    trigger plus the reserve (its summary request asks for 20,000 output tokens and goes out with
    the guard's output cap instead). The files it puts back after compacting are kept to a quarter
    of the input (`QWEN_CODE_RESTORED_FILES` at most)."""
    trigger = int(a.agent_input * QWEN_CODE_COMPACT_SHARE)
    window = max(a.agent_window, trigger + QWEN_CODE_COMPACT_RESERVE)
    model: dict[str, object] = {
        "name": a.model,
        "generationConfig": {"contextWindowSize": window, "samplingParams": {"max_tokens": a.max_output}},
    }
    files = a.agent_input // 4 // QWEN_CODE_RESTORED_FILE_TOKENS
    if files < QWEN_CODE_RESTORED_FILES:
        model["chatCompression"] = {"maxRecentFilesToRetain": files}
    config = {
        "$version": 4,
        "_comment": f"context-guard: {a.model}: {head}",
        "security": {"auth": {"selectedType": "openai", "baseUrl": _v1(base_url)}},
        "model": model,
        "context": {"autoCompactThreshold": round(trigger / window, 6)},
    }
    return json.dumps(config, indent=2)


def _v1(base_url: str | None) -> str:
    """The proxy's OpenAI-compatible base URL (`/v1` under `base_url`, by default the local proxy's)."""
    return f"{(base_url or 'http://127.0.0.1:4000').rstrip('/')}/v1"
