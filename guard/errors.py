"""The guard's errors. Messages carry numbers and names, never prompt text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

    @property
    def requested(self) -> int:
        if self.rule == "shared":
            return self.input_tokens + self.reserved_output + self.safety_margin
        return self.input_tokens + self.safety_margin


class ContextWindowExceeded(GuardError):
    """Nothing the policy allows makes the request fit; carries the numbers."""

    def __init__(self, shortfall: Shortfall, report: Any = None) -> None:
        self.shortfall = shortfall
        self.report = report
        super().__init__(self.render())

    def render(self) -> str:
        s = self.shortfall
        if s.rule == "shared":
            return (
                f"context-guard: this model's maximum context length is {s.limit} tokens ({s.model}), "
                f"but the request needs {s.requested} ({s.input_tokens} input after trimming + "
                f"{s.reserved_output} reserved output + {s.safety_margin} safety margin: "
                f"{s.input_tokens} + {s.reserved_output} + {s.safety_margin} > {s.limit}). "
                "Shorten the messages or lower max_tokens."
            )
        return (
            f"context-guard: model {s.model!r} accepts at most {s.limit} input tokens, "
            f"but the request has {s.input_tokens} input tokens after trimming plus a "
            f"{s.safety_margin}-token safety margin ({s.input_tokens} + {s.safety_margin} > {s.limit}). "
            "Shorten the messages."
        )

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
        return {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: " + self.render()},
        }
