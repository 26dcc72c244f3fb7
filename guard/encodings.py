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
from functools import lru_cache
from pathlib import Path

import tiktoken

_lock = threading.Lock()


def litellm_tokenizer_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    return path if path.is_dir() else None


@lru_cache(maxsize=None)
def get_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken encoding, from tiktoken's cache or else from LiteLLM's bundled files."""
    with _lock:
        if "TIKTOKEN_CACHE_DIR" not in os.environ and "DATA_GYM_CACHE_DIR" not in os.environ:
            bundled = litellm_tokenizer_dir()
            if bundled is not None:
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
        return tiktoken.get_encoding(name)
