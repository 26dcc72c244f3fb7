"""A probe of LiteLLM's hook contract, placed after the guard in a callback list.

For requests whose last user text starts with `contract-probe`, its pre-call hook returns a new
request dict with the text marked `[pre-call edit]`, and its deployment hook edits the kwargs it is
given in place (`[deployment edit]`) and returns them: what the guard does. The upstream then shows
whether LiteLLM sent what the hooks returned. Every call of either hook is recorded (hook, call type,
model) in `calls`, and in the file named by `GUARD_E2E_CONTRACT_LOG` when set (a proxy process)."""

from __future__ import annotations

import json
import os
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

FLAG = "contract-probe"
PRE_CALL = "[pre-call edit]"
DEPLOYMENT = "[deployment edit]"


def _last_user(body: dict[str, Any]) -> tuple[list[Any], int] | None:
    """The list holding the last user turn (messages or Responses input) and its index."""
    turns = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    if not isinstance(turns, list):
        return None
    for i in range(len(turns) - 1, -1, -1):
        turn = turns[i]
        if isinstance(turn, dict) and turn.get("role") == "user" and isinstance(turn.get("content"), str):
            return (turns, i) if turn["content"].startswith(FLAG) else None
    return None


def _marked(body: dict[str, Any], mark: str, in_place: bool) -> dict[str, Any]:
    found = _last_user(body)
    if found is None:
        return body
    turns, i = found
    turn = {**turns[i], "content": f"{turns[i]['content']} {mark}"}
    if in_place:
        turns[i] = turn
        return body
    edited = list(turns)
    edited[i] = turn
    key = "messages" if isinstance(body.get("messages"), list) else "input"
    return {**body, key: edited}


class ContractProbe(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict[str, Any]] = []

    def _record(self, hook: str, call_type: Any, body: dict[str, Any]) -> None:
        if _last_user(body) is None:
            return
        call = {"hook": hook, "call_type": str(getattr(call_type, "value", call_type)), "model": str(body.get("model"))}
        self.calls.append(call)
        path = os.environ.get("GUARD_E2E_CONTRACT_LOG")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(call) + "\n")

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> Any:
        self._record("pre_call", call_type, data)
        return _marked(data, PRE_CALL, in_place=False)

    async def async_pre_call_deployment_hook(self, kwargs: dict, call_type: Any) -> Any:
        self._record("deployment", call_type, kwargs)
        return _marked(kwargs, DEPLOYMENT, in_place=True)


probe = ContractProbe()
