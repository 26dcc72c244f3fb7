"""What the guard knows about a model family: tokenizer, exactness, window rule, calibration.

| family    | matches                                  | counted with          | default factor | window rule |
|-----------|------------------------------------------|-----------------------|----------------|-------------|
| openai    | gpt-*, o1/o3/o4*, chatgpt-* (any prefix) | tiktoken, exact       | 1.00           | shared; gpt-5* separate |
| anthropic | *claude*                                 | cl100k_base, estimate | 1.25           | shared      |
| gemini    | *gemini*                                 | cl100k_base, estimate | 1.15           | separate    |
| other     | everything else (vLLM, llama.cpp, ...)   | cl100k_base, estimate | 1.20           | shared      |

Why these factors: Claude 3+ and Gemini tokenizers are not published as local files. Claude's
tokenizer yields noticeably more tokens than cl100k on code and non-English text (Anthropic notes
newer Claude tokenizers use "up to 35% more tokens" than older ones), so the default leans high.
Gemini's SentencePiece vocabulary is at least as efficient as cl100k on English but less on code.
Open models range from Llama-2-era 32k vocabularies (~1.2x cl100k) to 128k+ vocabularies (~1.0x).
Every factor is a starting point set on the safe side; `calibration` in the policy overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal["openai", "anthropic", "gemini", "other"]
WindowRule = Literal["shared", "separate"]

DEFAULT_FACTORS: dict[str, float] = {"openai": 1.0, "anthropic": 1.25, "gemini": 1.15, "other": 1.20}
_CL100K_OPENAI = ("gpt-4-", "gpt-4", "gpt-3.5", "gpt-35")
_O200K_OPENAI = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-", "gpt-oss", "gpt-realtime")


@dataclass(frozen=True)
class ModelProfile:
    family: Family
    encoding: str
    exact: bool
    rule: WindowRule
    image_formula: str

    @property
    def default_factor(self) -> float:
        return DEFAULT_FACTORS[self.family]


def bare_name(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()


def profile(model: str) -> ModelProfile:
    """The family profile of a model name (provider prefixes such as `azure/` are ignored)."""
    name = bare_name(model)
    if name.startswith(_O200K_OPENAI):
        rule: WindowRule = "separate" if name.startswith("gpt-5") else "shared"
        return ModelProfile("openai", "o200k_base", True, rule, "openai")
    if name.startswith(_CL100K_OPENAI):
        return ModelProfile("openai", "cl100k_base", True, "shared", "openai")
    low = model.lower()
    if "claude" in low:
        return ModelProfile("anthropic", "cl100k_base", False, "shared", "anthropic")
    if "gemini" in low:
        return ModelProfile("gemini", "cl100k_base", False, "separate", "anthropic")
    return ModelProfile("other", "cl100k_base", False, "shared", "anthropic")
