"""Anthropic `/v1/messages` (`anthropic_messages`): metadata in `litellm_metadata`, refusals in
Anthropic's words (`prompt is too long: N tokens > M maximum`, which Claude Code parses)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from guard.core.errors import ContextWindowExceeded
from guard.dialects import ANTHROPIC, Dialect
from guard.shell.routes.base import Route


class MessagesRoute(Route):
    name: ClassVar[str] = "messages"
    call_types: ClassVar[frozenset[str]] = frozenset({"anthropic_messages"})
    dialect: ClassVar[Dialect] = ANTHROPIC

    def metadata_key(self, data: Mapping[str, Any]) -> str:
        # the request's own `metadata` is Anthropic's field (user_id): LiteLLM's is litellm_metadata
        return "litellm_metadata" if "litellm_metadata" in data or "metadata" not in data else "metadata"

    def refusal_text(self, e: ContextWindowExceeded) -> str:
        return e.render_anthropic()

    def client_message(self, e: ContextWindowExceeded) -> str | None:
        return e.render_anthropic()  # Anthropic clients parse them
