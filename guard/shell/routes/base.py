"""What every LiteLLM route adapter says: which call types it serves, the dialect of its bodies,
where LiteLLM keeps its metadata, how its refusals look to the client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import litellm

from guard.core.errors import ContextWindowExceeded
from guard.dialects import Dialect
from guard.state import telemetry


class ContextWindowExceededError(ContextWindowExceeded, litellm.ContextWindowExceededError):
    """What the guard raises through LiteLLM: LiteLLM's own context-window error (a 400 in the
    proxy, `context_window_fallbacks` in the Router) that is also `guard.ContextWindowExceeded`,
    with `.report` and `.shortfall`. `except guard.ContextWindowExceeded as e: e.report` works for
    `acompletion`, the Router and the sync wrapper alike."""

    def __init__(
        self,
        cause: ContextWindowExceeded,
        *,
        model: str,
        llm_provider: str,
        message: str | None = None,
        param: str = "messages",
    ) -> None:
        litellm.ContextWindowExceededError.__init__(
            self, message=message or cause.render(), model=model, llm_provider=llm_provider
        )
        self.shortfall, self.report = cause.shortfall, cause.report
        self.param = param  # the proxy copies it into OpenAI's error body


_ProxyRejection: Any = None


def _proxy_exception_type() -> Any:
    """The proxy's own error type, rendering OpenAI's `code: context_length_exceeded` (LiteLLM
    1.106 writes the HTTP status into `code` for every other error, its own CWE included)."""
    global _ProxyRejection
    if _ProxyRejection is None:
        from litellm.proxy._types import ProxyException

        class ContextLengthExceeded(ProxyException):
            def to_dict(self) -> dict[str, Any]:
                return {**super().to_dict(), "code": "context_length_exceeded"}

        _ProxyRejection = ContextLengthExceeded
    return _ProxyRejection


class Route:
    """One request shape LiteLLM serves, as the guard's hooks see it."""

    name: ClassVar[str]
    call_types: ClassVar[frozenset[str]]
    dialect: ClassVar[Dialect]

    def __repr__(self) -> str:
        return f"<route {self.name}>"

    def carries_turns(self, data: Any) -> bool:
        """Whether a hook's body is one this route fits (it has the dialect's list of turns)."""
        return isinstance(data, Mapping) and self.dialect.messages_key in data

    def metadata_key(self, data: Mapping[str, Any]) -> str:
        """Where LiteLLM keeps this request's metadata (the guard's record and a client's hints)."""
        return "litellm_metadata" if "litellm_metadata" in data else "metadata"

    def deployment_model(self, kwargs: Mapping[str, Any]) -> Any:
        """The model the deployment hook's kwargs name (the deployment LiteLLM picked)."""
        return kwargs.get("model")

    def refusal_text(self, e: ContextWindowExceeded) -> str:
        """A refusal's message, in the words this route's clients parse."""
        return e.render()

    def client_message(self, e: ContextWindowExceeded) -> str | None:
        """The message of the error raised to SDK callers (None: the guard's own wording)."""
        return None

    def proxy_refusal(
        self, e: ContextWindowExceeded, suffix: str = "", extra: Mapping[str, Any] | None = None
    ) -> Exception:
        """The proxy's 400 for a request that cannot fit, with the guard's headers on it (some
        routes answer errors from the exception without the headers hook)."""
        headers = telemetry.headers({**e.report.to_dict(), **(extra or {})})
        refusal: Exception = _proxy_exception_type()(
            message=self.refusal_text(e) + suffix,
            type="invalid_request_error",
            param=self.dialect.messages_key,
            code=400,
            headers=headers,
        )
        return refusal

    def sdk_refusal(self, e: ContextWindowExceeded, *, model: str, llm_provider: str) -> ContextWindowExceededError:
        return ContextWindowExceededError(
            e, model=model, llm_provider=llm_provider, message=self.client_message(e), param=self.dialect.messages_key
        )
