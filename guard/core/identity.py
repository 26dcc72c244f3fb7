"""Who sent a request, from LiteLLM's authenticated key (never from client metadata)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STATE_KEY = "context_guard"  # the guard's record in request metadata; admin overrides in key/team metadata


@dataclass(frozen=True)
class Identity:
    """Who sent the request, from LiteLLM's authenticated key (never from client metadata)."""

    team: tuple[str | None, ...] = ()
    key: tuple[str | None, ...] = ()
    trusted: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    tenant: str = "anonymous"  # whose summaries a request may reuse: the team, else the key


def _tenant(team_id: Any, key_hash: Any) -> str:
    if isinstance(team_id, str) and team_id:
        return "team:" + team_id
    if isinstance(key_hash, str) and key_hash:
        return "key:" + hashlib.sha256(key_hash.encode()).hexdigest()[:32]
    return "anonymous"


def _guard_overrides(*metadata: Any) -> tuple[Mapping[str, Any], ...]:
    out = []
    for md in metadata:
        if isinstance(md, Mapping) and isinstance(md.get(STATE_KEY), Mapping):
            out.append(md[STATE_KEY])
    return tuple(out)


def identity_from_auth(auth: Any) -> Identity:
    """Identity from the proxy's `UserAPIKeyAuth` (team id/alias, key alias, team and key metadata)."""
    if auth is None:
        return Identity()
    return Identity(
        team=(getattr(auth, "team_id", None), getattr(auth, "team_alias", None)),
        key=(getattr(auth, "key_alias", None), getattr(auth, "key_name", None)),
        trusted=_guard_overrides(getattr(auth, "team_metadata", None), getattr(auth, "metadata", None)),
        tenant=_tenant(getattr(auth, "team_id", None), getattr(auth, "api_key", None) or getattr(auth, "token", None)),
    )


def identity_from_metadata(md: Mapping[str, Any]) -> Identity:
    """Identity from the `user_api_key_*` fields the proxy writes into request metadata (a client
    that sends them is overwritten by the proxy; in SDK mode the caller is the application)."""
    return Identity(
        team=(md.get("user_api_key_team_id"), md.get("user_api_key_team_alias")),
        key=(md.get("user_api_key_alias"),),
        trusted=_guard_overrides(md.get("user_api_key_team_metadata"), md.get("user_api_key_metadata")),
        tenant=_tenant(md.get("user_api_key_team_id"), md.get("user_api_key_hash")),
    )
