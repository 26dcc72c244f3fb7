"""What the guard enforces for one model and caller, in the terms coding agents read.

An agent that knows the window compacts on its own, with its own summarizer, before the guard
must cut. The numbers are the guard's after policy (defaults < model < team < key):

- `window`: the model's context window as the guard holds it (policy caps applied);
- `max_output`: the output cap (the model's, lowered by `max_output_tokens`);
- `margin`: the safety margin the guard keeps free;
- `input_limit`: the most input a request reserving `max_output` may carry (the budget's room);
- `agent_window`: the window to tell an agent, `input_limit + max_output`: an agent that keeps its
  input plus its output under it is never cut;
- `auto_compact`: where to make an agent compact, a tenth below `input_limit`, so one turn's new
  results do not push the request past it.

`lines(announced, agent, ...)` renders them for Claude Code (shell exports) or Codex (config.toml).
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.core.budget import make_budget
from guard.core.limits import ModelLimits
from guard.core.policy import Policy

AGENTS = ("claude-code", "codex")
# Claude Code's CLAUDE_CODE_AUTO_COMPACT_WINDOW is read as at least this many tokens (2.1.331)
CLAUDE_CODE_MIN_AUTO_COMPACT_WINDOW = 100_000
AUTO_COMPACT_SHARE = 0.9


@dataclass(frozen=True)
class Announced:
    model: str
    window: int
    max_output: int
    margin: int
    input_limit: int

    @property
    def agent_window(self) -> int:
        return self.input_limit + self.max_output

    @property
    def auto_compact(self) -> int:
        return int(self.input_limit * AUTO_COMPACT_SHARE)


def announce(model: str, limits: ModelLimits, policy: Policy) -> Announced:
    """The limits one caller gets for `model` (its policy already resolved for the caller)."""
    budget, _ = make_budget(
        limits, policy, limits.max_output_tokens
    )  # the whole output cap reserved (clamped to the policy's)
    return Announced(
        model=model,
        window=limits.context_window,
        max_output=budget.reserved_output,
        margin=budget.margin,
        input_limit=max(0, budget.room),
    )


def lines(announced: Announced, agent: str, *, base_url: str | None = None) -> list[str]:
    """The settings that tell `agent` the guard's limits: shell `export` lines for Claude Code,
    config.toml lines for Codex. Comments say where each number comes from."""
    a = announced
    head = (
        f"window {a.window:,}, output cap {a.max_output:,}, safety margin {a.margin:,}: "
        f"input up to {a.input_limit:,} with the whole output reserved"
    )
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
            f'base_url = "{(base_url or "http://127.0.0.1:4000").rstrip("/")}/v1"',
            'env_key = "LITELLM_API_KEY"',
            'wire_api = "responses"',
        ]
        return out
    raise ValueError(f"unknown agent {agent!r}: one of {', '.join(AGENTS)}")
