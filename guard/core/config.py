"""What the guard reads of a LiteLLM proxy config: model_list limits and the `context_guard:` policy
section, validated from the parsed mapping (`parse_config`) or read from its file (`load_config`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from guard.core.errors import PolicyError
from guard.core.policy import PolicySet, load_policy_set


@dataclass(frozen=True)
class Deployment:
    """What the guard needs of one model_list entry."""

    model_name: str
    model: str
    model_info: Mapping[str, Any]
    api_base: str = ""  # where it is served (with the model: what calibration is learned per)


class SummarizerSettings(BaseModel):
    """`context_guard.summarizer`: the model that writes compaction summaries. Without this
    section the summarize strategy is skipped (reported as `no_summarizer`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="a model_list name (proxy) or any LiteLLM model string")
    litellm_params: dict[str, Any] = Field(
        default_factory=dict, description="extra arguments of the call (api_base, api_key, ...)"
    )
    timeout_seconds: float = Field(30.0, gt=0, description="for the whole summary, map-reduce included")
    failure_threshold: int = Field(3, ge=1, description="consecutive failures that open the circuit")
    cooldown_seconds: float = Field(30.0, ge=0, description="how long an open circuit skips the summarizer")


class CacheSettings(BaseModel):
    """`context_guard.cache`: where summaries are kept so a conversation compacts once per crossing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttl_seconds: int = Field(86_400, ge=1)
    memory_entries: int = Field(1024, ge=0, description="bounded in-process LRU in front of Redis")
    redis_url: str | None = Field(
        None, description="shared store in SDK mode; the proxy uses its coordination Redis when it has one"
    )
    redis_timeout_seconds: float = Field(
        1.0, gt=0, description="a slower answer is a miss; on a saturated proxy the event loop's own lag counts too"
    )
    failure_threshold: int = Field(3, ge=1, description="Redis errors in a row that pause it")
    cooldown_seconds: float = Field(10.0, ge=0)


class HeavyFitSettings(BaseModel):
    """`context_guard.heavy_fits`: how a worker fits long bodies. One of `min_messages` messages or
    more is fitted in a thread, off the event loop; at most `concurrency` such fits work at once
    (their CPU work holds the interpreter's lock: more would only slow the event loop and each
    other); one that waits longer than `wait_seconds` for its turn takes the deterministic path at
    once (no summarizer, no replay of its history's past turns: its cut is a cold cache's, anchored
    for the turns after it), never a lost request. A long body of a conversation this worker
    fitted before, grown since by at most `warm_chars` characters of new messages and by less than
    the room its last body left free (its cut is carried), is fitted on the event loop: its fit
    costs about counting those, less than the hop to a thread and the lock's handovers with the
    event loop cost (0: every long body in a thread)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_messages: int = Field(64, ge=1, description="bodies with this many messages or more are fitted off the loop")
    concurrency: int = Field(1, ge=0, description="heavy fits working at once per worker (0: no bound)")
    wait_seconds: float = Field(1.0, ge=0, description="longer in the queue: the deterministic path, at once")
    warm_chars: int = Field(
        100_000, ge=0, description="a conversation fitted here before, grown by at most this much: on the loop"
    )


class WorkerSettings(BaseModel):
    """`context_guard.worker`: what the guard does to each proxy worker it loads in. With
    `freeze_gc_at_start`, the objects alive once the guard and its tokenizers are loaded (LiteLLM's
    and the proxy's modules: ~0.7M on LiteLLM 1.110) go to Python's permanent GC generation
    (`gc.freeze()`), so a full collection walks only what requests made since, not the whole proxy:
    on two busy workers a full collection took 0.4-0.5 s, every few seconds, and held every request
    in flight on that worker (the stock proxy's too), 40-80 ms frozen. Reference counting still frees
    every frozen object that is let go; only cycles among them are never collected.

    `counting_threads`: 2 (the default) counts a large cold request (over 200k characters of new
    messages) on two threads where the worker may run on two CPUs, the second with its own copy of
    the encoder (`guard.core.tokens.set_counting_threads`): a cold 322k-token request of agent
    turns is counted in 31-33 ms rather than 50-52, for ~40 MB more in each worker. A busy proxy
    whose workers each have a core serves no more requests with it: 1 saves the memory there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    freeze_gc_at_start: bool = Field(True, description="gc.freeze() once the guard is loaded in a proxy worker")
    counting_threads: Literal[1, 2] = Field(
        2, description="threads that count a large cold request: 1 holds ~40 MB less, counts ~20 ms slower"
    )


@dataclass(frozen=True)
class GuardConfig:
    """What the guard reads from a LiteLLM config file: its policy set, the model_list deployments
    (with their model_info limits), and the optional summarizer, cache, heavy_fits and worker sections."""

    policies: PolicySet
    deployments: Mapping[str, Deployment]
    summarizer: SummarizerSettings | None = None
    cache: CacheSettings = field(default_factory=CacheSettings)
    heavy_fits: HeavyFitSettings = field(default_factory=HeavyFitSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)


def parse_model_list(model_list: Any) -> dict[str, Deployment]:
    """model_name -> its deployment: the first entry's real model, and per limit the smallest
    value any entry of that name configures (a load-balanced alias is as small as its smallest)."""
    if model_list is None:
        return {}
    if not isinstance(model_list, list):
        raise PolicyError("model_list must be a list")
    out: dict[str, Deployment] = {}
    for i, entry in enumerate(model_list):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("model_name"), str):
            raise PolicyError(f"model_list[{i}] needs a model_name")
        params = entry.get("litellm_params") or {}
        info = entry.get("model_info") or {}
        if not isinstance(params, Mapping) or not isinstance(info, Mapping):
            raise PolicyError(f"model_list[{i}]: litellm_params and model_info must be mappings")
        real: str = params["model"] if isinstance(params.get("model"), str) else entry["model_name"]
        base: str = params["api_base"] if isinstance(params.get("api_base"), str) else ""
        name = entry["model_name"]
        if name not in out:
            out[name] = Deployment(name, real, dict(info), base)
            continue
        merged = dict(out[name].model_info)
        for key in ("max_input_tokens", "max_output_tokens", "max_tokens"):
            values = [v for v in (merged.get(key), info.get(key)) if isinstance(v, int) and v > 0]
            if values:
                merged[key] = min(values)
        same_base = out[name].api_base if out[name].api_base == base else "*"  # a group over several endpoints
        out[name] = Deployment(name, out[name].model, merged, same_base)
    return out


def parse_config(data: Mapping[str, Any]) -> GuardConfig:
    if not isinstance(data, Mapping):
        raise PolicyError("the config file must hold a mapping")
    section = data.get("context_guard")
    if section is not None and not isinstance(section, Mapping):
        raise PolicyError("context_guard must be a mapping")
    section = dict(section or {})
    summarizer = section.pop("summarizer", None)
    cache = section.pop("cache", None)
    heavy = section.pop("heavy_fits", None)
    worker = section.pop("worker", None)
    try:
        settings = SummarizerSettings.model_validate(_env(summarizer)) if summarizer is not None else None
        cache_settings = CacheSettings.model_validate(_env(cache or {}))
        heavy_settings = HeavyFitSettings.model_validate(_env(heavy or {}))
        worker_settings = WorkerSettings.model_validate(_env(worker or {}))
    except ValidationError as e:
        raise PolicyError(f"invalid context_guard summarizer/cache/heavy_fits/worker settings:\n{e}") from None
    deployments = parse_model_list(data.get("model_list"))
    return GuardConfig(load_policy_set(section), deployments, settings, cache_settings, heavy_settings, worker_settings)


def _env(value: Any) -> Any:
    """`os.environ/NAME` strings replaced by the variable's value (LiteLLM's config convention)."""
    if isinstance(value, str) and value.startswith("os.environ/"):
        return os.environ.get(value.split("/", 1)[1])
    if isinstance(value, Mapping):
        return {k: _env(v) for k, v in value.items()}
    return value


def load_config(path: str | Path) -> GuardConfig:
    """Read and validate a LiteLLM config file's `context_guard:` section and `model_list`
    (raises PolicyError naming the bad field). A file read and a YAML parse: no I/O client."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyError(f"cannot read config {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise PolicyError(f"config {path} is not valid YAML: {e}") from None
    return parse_config(data)
