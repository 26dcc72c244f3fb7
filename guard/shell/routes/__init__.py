"""One adapter per LiteLLM route (`chat`, `messages`, `responses`) behind one protocol (`Route`):
the call types it serves, its dialect, where its metadata lives and how its refusals look. The
hooks pick the route from LiteLLM's call type and never ask which one they hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard.shell.routes.base import ContextWindowExceededError, Route
from guard.shell.routes.chat import ChatRoute
from guard.shell.routes.messages import MessagesRoute
from guard.shell.routes.responses import ResponsesRoute

CHAT: Route = ChatRoute()
MESSAGES: Route = MessagesRoute()
RESPONSES: Route = ResponsesRoute()
ROUTES: tuple[Route, ...] = (CHAT, MESSAGES, RESPONSES)
_BY_CALL = {call: route for route in ROUTES for call in route.call_types}


def for_call(call_type: Any) -> Route | None:
    """The route of a LiteLLM call type (a `CallTypes` member or its value); None: not guarded."""
    return _BY_CALL.get(str(getattr(call_type, "value", call_type)))


def for_routing(kwargs: Mapping[str, Any], messages: Any) -> tuple[Route, dict[str, Any]] | None:
    """The route and body of a request the Router is choosing deployments for (its filter hook
    gets no call type): Responses if it has `input` and no `messages`; Anthropic if it has a
    top-level `system` or LiteLLM's `litellm_metadata`; else chat. None: no list of turns."""
    if "input" in kwargs and "messages" not in kwargs:
        return (RESPONSES, dict(kwargs)) if isinstance(kwargs.get("input"), (list, str)) else None
    turns = kwargs.get("messages", messages)
    if not isinstance(turns, list):
        return None
    body = {**kwargs, "messages": turns}
    return (MESSAGES if "system" in body or "litellm_metadata" in body else CHAT), body


__all__ = ["CHAT", "MESSAGES", "RESPONSES", "ROUTES", "ContextWindowExceededError", "Route", "for_call", "for_routing"]
