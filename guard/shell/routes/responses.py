"""The OpenAI Responses API: `/v1/responses`, `litellm.aresponses` / `responses` and the Router's
Responses calls. `metadata` is a field the provider receives (strings only), so the guard's
record goes to `litellm_metadata`; a refusal names `param: input`, as OpenAI's own does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from guard.dialects import RESPONSES, Dialect
from guard.shell.routes.base import Route


class ResponsesRoute(Route):
    name: ClassVar[str] = "responses"
    # "responses": sync calls and the streaming success hook; "aresponses" everywhere else
    call_types: ClassVar[frozenset[str]] = frozenset({"responses", "aresponses"})
    dialect: ClassVar[Dialect] = RESPONSES

    def metadata_key(self, data: Mapping[str, Any]) -> str:
        return "litellm_metadata"

    def deployment_model(self, kwargs: Mapping[str, Any]) -> Any:
        model, provider = kwargs.get("model"), kwargs.get("custom_llm_provider")
        if isinstance(model, str) and "/" not in model and isinstance(provider, str) and provider:
            return f"{provider}/{model}"  # sync litellm.responses hands the hook the bare model name
        return model
