"""A pass that would only repeat the previous one. The proxy runs the guard twice per request:
before routing, then in the deployment hook (and again per retry), on the body the first pass
returned. Where nothing a fit reads has changed since (the body's prompt, the policy, the model's
limits and calibration key), fitting again gives the same answer, so the later pass takes it
(`holds`) and costs a serialization of the body instead of a fit.

Sealed: the proxy's first pass (the deployment hook's follows it) and every later pass (a retry may
follow), not an SDK call's only pass. Kept per `litellm_call_id`, in this process, bounded like the
reports (`records.BOUND`). The body is compared by its JSON (every key but LiteLLM's plumbing,
`IGNORED`; a key this list does not know, or a value JSON cannot hold, means the pass fits again, as
it always did), so an edit made between the passes (another callback's, in place or not) is seen.
Left out on purpose: a calibration factor learned between the two passes (the next request counts
with it; the margin covers the moment)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from guard.core.config import Deployment
from guard.core.errors import GuardError
from guard.core.limits import ModelLimits
from guard.core.memo import bounded_put
from guard.core.policy import Policy
from guard.fit.engine import Engine
from guard.shell.records import BOUND

# what LiteLLM adds around a request and the fit never reads: the request's metadata (the policy
# read from it is compared instead), the client's original body, the deployment (model, model_info,
# provider: its limits and calibration key are compared instead), transport, logging and retry
# settings
IGNORED = frozenset(
    {
        "metadata",
        "litellm_metadata",
        "proxy_server_request",
        "litellm_call_id",
        "litellm_trace_id",
        "litellm_logging_obj",
        "litellm_parent_otel_span",
        "model",
        "model_info",
        "custom_llm_provider",
        "api_key",
        "api_base",
        "client",
        "shared_session",
        "secret_fields",
        "timeout",
        "request_timeout",
        "max_retries",
        "caching",
        "stream",
        "mock_response",
        "allow_client_keepalive_override",
        "merge_reasoning_content_in_choices",
        "use_in_pass_through",
        "use_litellm_proxy",
        "use_xai_oauth",
        "_context_compaction_state",
    }
)


@dataclass(frozen=True)
class Seal:
    """What a pass's fit depended on besides the body."""

    policy: Policy
    limits: ModelLimits
    calibration_key: str

    @classmethod
    def of(cls, engine: Engine, name: str, policy: Policy, deployment: Deployment | None, key: str) -> Seal | None:
        """The seal of a fit of model `name` under `policy` on `deployment`, counted for calibration
        key `key`; None where its limits do not resolve (the fit says why, with its own error)."""
        try:
            return cls(policy, engine.limits_for(name, policy, deployment), key)
        except GuardError:
            return None


_SEALS: dict[str, tuple[Seal, int]] = {}


def prompt_digest(body: Mapping[str, Any]) -> int | None:
    """A digest of the body as the fit reads it (every key but `IGNORED`, in key order, as JSON);
    None if a value is not JSON (a pass over it always fits again). Python's own hash of the bytes:
    this process's only, and it keeps the GIL (hashlib lets go of it on large inputs, and a busy
    proxy's other threads then take it: ~0.5 ms a request in the load bench's profile)."""
    try:
        return hash(orjson.dumps({k: body[k] for k in sorted(body) if k not in IGNORED}))
    except TypeError:  # a value orjson cannot write (an SDK object), or a key that is not a string
        return None


def seal(call: str | None, made: Seal | None, body: Mapping[str, Any]) -> None:
    """Remember the body a pass of call `call` returned, fitted under `made`."""
    if call is None or made is None:
        return
    digest = prompt_digest(body)
    if digest is not None:
        bounded_put(_SEALS, call, (made, digest), BOUND)


def holds(call: str | None, made: Seal | None, body: Mapping[str, Any]) -> bool:
    """Whether `body` is what an earlier pass of call `call` returned, under the same `made`."""
    found = _SEALS.get(call) if call is not None and made is not None else None
    return found is not None and found[0] == made and prompt_digest(body) == found[1]


def own_report(previous: Any) -> dict[str, Any]:
    """The report of a pass that took an earlier pass's answer (`previous`, that pass's report): what
    a fit of the body it returned would have said, unchanged, nothing saved."""
    before = previous if isinstance(previous, Mapping) else {}
    tokens = before.get("input_tokens_after")
    return {
        "model": before.get("model"),
        "outcome": "unchanged",
        "input_tokens_before": tokens,
        "input_tokens_after": tokens,
        "max_tokens": before.get("max_tokens"),
        "actions": [],
    }
