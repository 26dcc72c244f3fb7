"""Never silently unguarded: prompts the guard sees at a hook but has no route for, and prompts that
reach a provider without having been fitted.

- At a hook (`seen`): LiteLLM hands the guard a request carrying a prompt under a call type it does
  not fit: a pass-through route (`/anthropic/...`, `/openai/...` and `pass_through_endpoints`
  forward the client's body as is), the legacy text completion, or a call type a newer LiteLLM
  added. It is counted (`context_guard_unguarded_calls_total`, label `call_type`) and logged once
  per call type with what to do; the model's policy `on_unguarded: refuse` refuses it instead (a
  400 naming the fitted routes), so an org can fail closed.
- At the provider call (`reached`, from LiteLLM's pre-API-call and success logging): a prompt
  call no hook of the guard fitted (sync `litellm.completion` without the wrapper, a route LiteLLM
  serves without the Python hooks, such as one its Rust core serves end to end). It is counted and
  logged the same way. LiteLLM swallows exceptions from its logging hooks, so a call already at the
  provider can be counted but not stopped; `guard.shell.startup` names, at start-up, the settings
  that route around the hooks.

Each call is counted once (by `litellm_call_id`), however many hooks or guards see it. Nothing
here reads prompt text: a request is a prompt when it has a list of turns or a prompt field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import litellm

from guard.core.memo import bounded_put
from guard.shell import records
from guard.shell.summarizer import internal_call
from guard.state import telemetry

if TYPE_CHECKING:
    from guard.shell.services import Services

# call types that send a prompt to a model: one of these reaching a provider unfitted is a bypass
_PROMPT_CALL_WORDS = ("completion", "responses", "messages", "generate_content")
# at a hook, pass-throughs too (embeddings, speech, images, rerank and moderation carry no context to fit)
_SEEN_CALL_WORDS = (*_PROMPT_CALL_WORDS, "pass_through")
_COUNTED: dict[str, None] = {}  # call ids counted as unguarded


def carries_prompt(data: Any) -> bool:
    """Whether a request body holds a prompt: a non-empty list of turns (`messages`, `contents`), a
    Responses `input` (a string, or a list with an item), or a `prompt`."""
    if not isinstance(data, Mapping):
        return False
    if any(isinstance(data.get(name), list) and data[name] for name in ("messages", "contents")):
        return True
    given = data.get("input")
    if (isinstance(given, str) and given) or (isinstance(given, list) and any(isinstance(i, Mapping) for i in given)):
        return True
    return bool(data.get("prompt")) and isinstance(data.get("prompt"), (str, list))


def _first_time(data: Mapping[str, Any]) -> bool:
    key = records.once_key(data)
    if key in _COUNTED:
        return False
    bounded_put(_COUNTED, key, None, records.BOUND)
    return True


def _refuses(cg: Services, model: str) -> bool:
    try:
        return cg.engine.policies.for_model(model).on_unguarded == "refuse"
    except Exception as e:  # a policy that cannot be read: the configured default decides nothing, so warn
        telemetry.log.error("context-guard on_unguarded lookup: %s", type(e).__name__)
        return False


class UnguardedRequestError(litellm.BadRequestError):  # type: ignore[misc]
    """A prompt on a route the guard cannot fit, refused because its model's policy says
    `on_unguarded: refuse` (HTTP 400)."""


def seen(cg: Services, data: Any, call_type: Any, hook: str) -> None:
    """A hook got a request under a call type with no route (`guard.shell.routes.for_call` is None):
    counted and logged if it carries a prompt, refused under `on_unguarded: refuse`."""
    name = str(getattr(call_type, "value", call_type) or "unknown")
    if internal_call.get(False) or not any(w in name for w in _SEEN_CALL_WORDS) or not carries_prompt(data):
        return
    model = str(data.get("model") or "")
    refuse = _refuses(cg, model)
    if _first_time(data):
        telemetry.unguarded(name, where=f"the guard's {hook}", refused=refuse)
    if refuse:
        raise UnguardedRequestError(
            message=(
                f"context-guard: a {name} request for model {model!r} was refused: the guard cannot fit "
                "this route (it forwards the body unchanged), and the policy says on_unguarded: refuse. "
                "Send it to /chat/completions, /v1/messages or /v1/responses, which are fitted, or set "
                "on_unguarded: warn for this model."
            ),
            model=model,
            llm_provider="context-guard",
        )


def reached(kwargs: Any) -> None:
    """A prompt reached the provider (LiteLLM's logging hooks, which cannot stop it) without a
    guard's report: counted and logged once per call type. Never raises."""
    try:
        if internal_call.get(False) or not isinstance(kwargs, Mapping):
            return
        call_type = str(kwargs.get("call_type") or "unknown")
        if not any(word in call_type for word in _PROMPT_CALL_WORDS) or records.report_in(kwargs) is not None:
            return
        if records.once_key(kwargs) in records.REPORTS:  # fitted by a hook whose metadata the logging object lacks
            return
        if _first_time(kwargs):
            telemetry.unguarded(call_type, where="the provider call", refused=False)
    except Exception as e:  # telemetry must never fail a request
        telemetry.log.error("context-guard bypass check: %s", type(e).__name__)
