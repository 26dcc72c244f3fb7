"""The guard's errors. Messages carry numbers and names, never prompt text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guard.core.report import Report


class GuardError(Exception):
    """Base class of every error the guard raises on purpose."""


class BadRequest(GuardError):
    """The request body is malformed (a client error: maps to HTTP 400)."""


class UnknownModel(GuardError):
    """No context window is known or configured for the model."""

    def __init__(self, model: str) -> None:
        self.model = model
        super().__init__(
            f"context-guard: no context window known for model {model!r}; "
            "add model_info (max_input_tokens, max_output_tokens) to its model_list entry "
            "or set context_guard.default_context_window"
        )


class PolicyError(GuardError):
    """The guard's policy or configuration is invalid."""


@dataclass(frozen=True)
class Shortfall:
    """The numbers of a request that cannot be made to fit."""

    model: str
    rule: str
    limit: int
    input_tokens: int
    reserved_output: int
    safety_margin: int
    trimmed: bool = True  # whether any step cut the input before giving up
    fixed_tokens: int = 0  # tool schemas and framing: input no step can cut

    @property
    def requested(self) -> int:
        if self.rule == "shared":
            return self.input_tokens + self.reserved_output + self.safety_margin
        return self.input_tokens + self.safety_margin

    @property
    def over(self) -> str:
        """What is over: the part no step can cut, if that alone does not fit, else the messages."""
        if self.rule == "shared" and self.reserved_output + self.safety_margin >= self.limit:
            return "output"
        uncut = self.fixed_tokens + self.safety_margin + (self.reserved_output if self.rule == "shared" else 0)
        if self.fixed_tokens and uncut > self.limit:
            return "tools"
        return "messages"


class ContextWindowExceeded(GuardError):
    """Nothing the policy allows makes the request fit; carries the numbers."""

    def __init__(self, shortfall: Shortfall, report: Report) -> None:
        self.shortfall = shortfall
        self.report = report
        super().__init__(self.render())

    def _advice(self) -> str:
        s = self.shortfall
        if s.over == "output":
            return f"The reserved output alone ({s.reserved_output}) leaves no room for input: lower max_tokens."
        if s.over == "tools":
            lower = " or lower max_tokens" if s.rule == "shared" else ""
            return (
                f"The tool schemas and framing alone take {s.fixed_tokens} tokens: send fewer or smaller tools{lower}."
            )
        return "Shorten the messages or lower max_tokens." if s.rule == "shared" else "Shorten the messages."

    def render(self) -> str:
        s = self.shortfall
        after = " after trimming" if s.trimmed else ""
        if s.rule == "shared":
            return (
                f"context-guard: this model's maximum context length is {s.limit} tokens ({s.model}), "
                f"but the request needs {s.requested} ({s.input_tokens} input{after} + "
                f"{s.reserved_output} reserved output + {s.safety_margin} safety margin: "
                f"{s.input_tokens} + {s.reserved_output} + {s.safety_margin} > {s.limit}). " + self._advice()
            )
        return (
            f"context-guard: model {s.model!r} accepts at most {s.limit} input tokens, "
            f"but the request has {s.input_tokens} input tokens{after} plus a "
            f"{s.safety_margin}-token safety margin ({s.input_tokens} + {s.safety_margin} > {s.limit}). "
            + self._advice()
        )

    def render_anthropic(self) -> str:
        """In Anthropic's own words first (`prompt is too long: N tokens > M maximum`), which agent
        clients such as Claude Code parse to compact by N - M; then the guard's numbers."""
        s = self.shortfall
        return f"prompt is too long: {s.requested} tokens > {s.limit} maximum ({self.render()})"

    def openai_error(self) -> dict[str, Any]:
        """The body of OpenAI's 400 for an over-long request."""
        return {
            "error": {
                "message": self.render(),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }

    def anthropic_error(self) -> dict[str, Any]:
        """The body of Anthropic's 400 for an over-long request."""
        return {"type": "error", "error": {"type": "invalid_request_error", "message": self.render_anthropic()}}
