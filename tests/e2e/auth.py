"""custom_auth for the e2e proxy: fixed keys standing for keys and teams an admin created."""

from __future__ import annotations

from fastapi import HTTPException
from litellm.proxy._types import UserAPIKeyAuth

KEYS = {
    "sk-master": dict(key_alias="admin"),
    "sk-team-a": dict(key_alias="alice", team_id="team-a", team_alias="Team A"),
    # a team whose admin-set metadata caps its output (trusted: it comes from the key record)
    "sk-team-b": dict(key_alias="bob", team_id="team-b", team_metadata={"context_guard": {"max_output_tokens": 64}}),
    "sk-team-c": dict(key_alias="carol", team_id="team-c"),
    "sk-team-trim": dict(key_alias="dan", team_id="team-trim"),
    "sk-team-clamp": dict(key_alias="erin", team_id="team-clamp"),
}


async def user_api_key_auth(request, api_key: str) -> UserAPIKeyAuth:
    token = (api_key or "").removeprefix("Bearer ").strip()
    if token not in KEYS:
        raise HTTPException(status_code=401, detail="unknown key")
    return UserAPIKeyAuth(api_key=token, **KEYS[token])
