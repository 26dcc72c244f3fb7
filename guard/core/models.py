"""What the guard knows about a model family: tokenizer, exactness, window rule, calibration.

| family    | matches                                  | counted with                          | factor | window rule |
|-----------|------------------------------------------|---------------------------------------|--------|-------------|
| openai    | gpt-*, o1/o3/o4*, chatgpt-* (any prefix) | tiktoken, exact                       | 1.00   | shared [1]  |
| anthropic | *claude*                                 | cl100k_base, estimate                 | 1.25   | shared      |
| gemini    | *gemini*                                 | cl100k_base, estimate                 | 1.15   | separate    |
| mistral   | *mistral*, *mixtral*, *codestral*, ...   | tekken (exact extra), else estimate   | 1.45   | shared      |
| qwen      | *qwen*, *qwq*                            | Qwen's vocab (exact extra), else est. | 1.50   | shared      |
| deepseek  | *deepseek*                               | DeepSeek-V3's (exact extra), else est.| 1.35   | shared      |
| other     | everything else (vLLM, llama.cpp, ...)   | cl100k_base, estimate                 | 1.20   | shared      |

[1] gpt-5* names: separate (their `max_input_tokens` counts input only).

Why these factors: Claude 3+ and Gemini tokenizers are not published as local files. Claude's
tokenizer yields noticeably more tokens than cl100k on code and non-English text (Anthropic notes
newer Claude tokenizers use "up to 35% more tokens" than older ones), so the default leans high.
Gemini's SentencePiece vocabulary is at least as efficient as cl100k on English but less on code.
Mistral, Qwen and DeepSeek publish their tokenizers on PyPI (the `exact` extra): with it installed
they are counted exactly (factor 1.0). Without it, their factors were measured with
`bench/accuracy.py` (docs/benchmarks.md): the 99th percentile of their token count over cl100k's
on real code, prose, JSON and non-English text, JSON being the worst (up to 1.45x for Qwen 3.6),
so that at most 1% of texts are under-counted; the price is over-counting (+20-80% on average).
Other open models range from Llama-2-era 32k vocabularies (~1.2x cl100k) to 128k+ vocabularies
(~1.0x); with no local reference the factor stays at 1.20. Every factor is a starting point on
the safe side; `calibration` in the policy overrides it (only upward of 1.0).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

Family = Literal["openai", "anthropic", "gemini", "mistral", "qwen", "deepseek", "other"]
WindowRule = Literal["shared", "separate"]

DEFAULT_FACTORS: dict[str, float] = {
    "openai": 1.0,
    "anthropic": 1.25,
    "gemini": 1.15,
    "mistral": 1.45,
    "qwen": 1.50,
    "deepseek": 1.35,
    "other": 1.20,
}
_MISTRAL = ("mistral", "mixtral", "codestral", "ministral", "magistral", "devstral", "pixtral")
_CL100K_OPENAI = ("gpt-4-", "gpt-4", "gpt-3.5", "gpt-35")
# LiteLLM providers that send a chat body as it is to an OpenAI-compatible server
OPENAI_COMPATIBLE = frozenset(
    {
        "openai",
        "custom_openai",
        "openai_like",
        "hosted_vllm",
        "vllm",
        "litellm_proxy",
        "lm_studio",
        "ollama",
        "ollama_chat",
    }
)
_O200K_OPENAI = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-", "gpt-oss", "gpt-realtime")


@dataclass(frozen=True)
class ModelProfile:
    family: Family
    encoding: str
    exact: bool
    rule: WindowRule
    image_formula: str
    exact_encoding: str | None = None  # an exact tokenizer of the family, if its package is installed
    # whose framing a chat completions body goes out in: "anthropic" where LiteLLM sends a Claude
    # model's chat body as a Messages request (content blocks, a tool-use prompt: Anthropic's API,
    # Bedrock, Vertex), "generic" elsewhere (an OpenAI-compatible server frames it its own way)
    renders: str = "generic"
    reasons: bool = False  # an OpenAI reasoning model (GPT-5, o-series): its chat tools cost a preamble

    @property
    def default_factor(self) -> float:
        return DEFAULT_FACTORS[self.family]

    @property
    def tool_framing(self) -> str:
        """How the provider frames tool schemas: "openai" (function tools rendered as a namespace,
        `guard.core.toolschema`), "openai-reasoning" (the same, and a reasoning model's preamble
        for tools on chat completions) or "json" (counted as their compact JSON, an over-count
        where the provider's framing is unknown)."""
        if self.family != "openai":
            return "json"
        return "openai-reasoning" if self.reasons else "openai"


def bare_name(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()


@functools.lru_cache(maxsize=1024)
def profile(model: str) -> ModelProfile:
    """The family profile of a model name (provider prefixes such as `azure/` are ignored),
    memoised: every request asks it several times, and reading a version out of a name is regex
    work (a profile is frozen, one per name)."""
    name = bare_name(model)
    if name.startswith(_O200K_OPENAI):
        rule: WindowRule = "separate" if name.startswith("gpt-5") else "shared"
        reasons = name.startswith(("gpt-5", "o1", "o3", "o4")) and "chat" not in name
        return ModelProfile("openai", "o200k_base", True, rule, openai_images(name), reasons=reasons)
    if name.startswith(_CL100K_OPENAI):
        return ModelProfile("openai", "cl100k_base", True, "shared", openai_images(name))
    low = model.lower()
    if "claude" in low:
        compatible = low.split("/", 1)[0] in OPENAI_COMPATIBLE  # (the provider prefix, if any)
        return ModelProfile(
            "anthropic",
            "cl100k_base",
            False,
            "shared",
            claude_images(low),
            None,
            "generic" if compatible else "anthropic",
        )
    if "gemini" in low:
        return ModelProfile("gemini", "cl100k_base", False, "separate", gemini_images(low))
    if any(k in low for k in _MISTRAL):
        return ModelProfile("mistral", "cl100k_base", False, "shared", "anthropic", "mistral-tekken")
    if "qwen" in low or "qwq" in low:
        newest = "qwen3.5" in low or "qwen3.6" in low
        return ModelProfile("qwen", "cl100k_base", False, "shared", "anthropic", "qwen3.6" if newest else "qwen2.5")
    if "deepseek" in low:
        return ModelProfile("deepseek", "cl100k_base", False, "shared", "anthropic", "deepseek-v3")
    # an OpenAI name this table does not know yet (gpt-6, codex-mini): an estimate, its images by
    # OpenAI's newest rules
    images = openai_images(name) if name.startswith(("gpt-", "codex-")) else "anthropic"
    return ModelProfile("other", "cl100k_base", False, "shared", images)


# the version a model name carries after its family's name: a digit, then a minor digit that is not
# the start of a date ("claude-3-5-sonnet", "claude-opus-4-7", "claude-sonnet-4-20250514" is 4.0,
# "gemini-2.5-flash", "gemini-3-pro-preview")
_CLAUDE_VERSION = re.compile(r"claude[a-z._-]*?(\d+)(?:[-.](\d)(?!\d))?")
_GEMINI_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d))?")


def claude_images(name: str) -> str:
    """The image formula of a Claude model (`guard.core.images`): the 2576-px tier from Claude 4.7
    on, and for a name whose version cannot be read (the larger count); else the 1568-px one."""
    found = _CLAUDE_VERSION.search(name)
    if found is None:
        return "claude-2576"
    version = (int(found.group(1)), int(found.group(2) or 0))
    return "claude-2576" if version >= (4, 7) else "anthropic"


def gemini_images(name: str) -> str:
    """The image formula of a Gemini model: a budget per image from Gemini 3 on, 258 an image on
    2.5, tiles before; the largest where the name carries no version ("gemini-exp-1206")."""
    found = _GEMINI_VERSION.search(name)
    if found is None:
        return "gemini"
    version = (int(found.group(1)), int(found.group(2) or 0))
    return "gemini-3" if version >= (3, 0) else "gemini-2.5" if version >= (2, 5) else "gemini-tiles"


_GPT_VERSION = re.compile(r"gpt-(\d+)(?:\.(\d+))?(.*)")


def openai_images(name: str) -> str:
    """The image formula of an OpenAI model (`guard.core.images`): GPT-4o mini's dear tiles, 32-px
    patches for the models OpenAI's guide bills so (their multiplier and era: GPT-4.1 mini and
    nano, o4-mini, codex-mini, GPT-5 mini and nano, GPT-5.2 and later), else 85 + 170 tiles."""
    if name.startswith("gpt-4o-mini"):
        return "openai-4o-mini"
    if name.startswith(("o1", "o3")):
        return "openai-o"
    multiplier = 2.46 if "nano" in name else 1.72 if "codex-mini" in name or name.startswith("o4-mini") else 1.62
    if name.startswith(("gpt-4.1-mini", "gpt-4.1-nano", "o4-mini", "codex-mini")):
        return f"openai-patches-early-{multiplier}"
    found = _GPT_VERSION.match(name)
    if found is None or int(found.group(1)) < 5:
        return "openai"
    version = (int(found.group(1)), int(found.group(2) or 0))
    small = "mini" in found.group(3) or "nano" in found.group(3)
    if version < (5, 2):  # GPT-5 and 5.1: tiles, their mini and nano patches (billed at 1.2 and 1.5)
        if small and "codex" not in name:
            multiplier = 1.5 if "nano" in name else 1.2
        return f"openai-patches-early-{multiplier}" if small else "openai-5"
    era = "early" if version < (5, 4) else "5.4" if version < (5, 5) else "5.5" if version < (5, 6) else "5.6"
    return f"openai-patches-{era}-{multiplier if small else 1.2}"
