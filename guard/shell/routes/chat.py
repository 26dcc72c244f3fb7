"""`/chat/completions`, `litellm.acompletion` / `completion` and the Router's chat calls."""

from __future__ import annotations

from typing import ClassVar

from guard.dialects import OPENAI, Dialect
from guard.shell.routes.base import Route


class ChatRoute(Route):
    name: ClassVar[str] = "chat"
    call_types: ClassVar[frozenset[str]] = frozenset({"completion", "acompletion"})
    dialect: ClassVar[Dialect] = OPENAI
