"""The token counters of one engine: one per (encoding, calibration factor, image formula, tool
framing), built
on first use and shared across threads, with the factor each model family counts with."""

from __future__ import annotations

import threading
from collections.abc import Callable

from guard.core import calibration
from guard.core.encodings import exact_available, get_vocab
from guard.core.models import ModelProfile, profile
from guard.core.policy import Policy
from guard.core.tokens import Encoding, TokenCounter

# what a deployment's provider answers taught: (recent ratios, the floor a counting miss set)
Learned = Callable[[], tuple[list[float], float | None]]


class Counters:
    """The counters an engine counts with, keyed by encoding, factor, image formula and tool framing."""

    def __init__(self, encoding_loader: Callable[[str], Encoding] = get_vocab) -> None:
        self._load_encoding = encoding_loader
        self._counters: dict[tuple[str, float, str, str, str], TokenCounter] = {}
        self._encodings: dict[str, Encoding] = {}  # one load an encoding, shared by its counters
        self._lock = threading.Lock()

    def get(
        self, model: str, policy: Policy, learned: Learned | None = None
    ) -> tuple[TokenCounter, bool, calibration.Factor]:
        """The counter for the real model `model`, whether it is exact, and the calibration factor
        it counts with: the admin's pin for the family, else the family's static factor; raised
        (with `calibration_mode: auto`, when `learned` is given) to what the deployment's provider
        answers taught, and after a counting miss, in either mode, above the factor that missed
        (see `calibration.factor`). `learned` is not called for a family counted exactly."""
        prof = profile(model)
        exact_vocab = _exact_vocab(prof)
        encoding = exact_vocab or prof.encoding
        factor = _factor(prof, exact_vocab, policy, learned)
        # the provider's own framing of tool schemas where the count is exact; JSON elsewhere
        framing = prof.tool_framing if factor.value == 1.0 and exact_vocab is None and prof.exact else "json"
        key = (encoding, factor.value, prof.image_formula, framing, prof.renders)
        with self._lock:
            counter = self._counters.get(key)
            if counter is None:
                if encoding not in self._encodings:
                    self._encodings[encoding] = self._load_encoding(encoding)
                counter = TokenCounter(
                    self._encodings[encoding],
                    factor=factor.value,
                    image_formula=prof.image_formula,
                    tool_framing=framing,
                    renders=prof.renders,
                )
                self._counters[key] = counter
        return counter, (prof.exact or exact_vocab is not None) and factor.value == 1.0, factor

    def like(self, counter: TokenCounter, factor: float) -> TokenCounter:
        """The counter that counts as `counter` (one of these) does but with the calibration factor
        `factor`: what a cut counted with a factor the deployment has since left is made again with
        (`guard.fit.factor_change`)."""
        with self._lock:
            key = next(k for k, c in self._counters.items() if c is counter)
            twin = (key[0], factor, *key[2:])
            if twin not in self._counters:
                self._counters[twin] = TokenCounter(
                    counter.encoding,
                    factor=factor,
                    image_formula=counter.image_formula,
                    tool_framing=counter.tool_framing,
                    renders=counter.renders,
                )
            return self._counters[twin]

    def factor(self, model: str, policy: Policy, learned: Learned | None = None) -> calibration.Factor:
        """The calibration factor `get` counts the real model `model` with, without building its
        counter (nor loading a tokenizer: what announces a model's limits asks this of every model
        listed)."""
        prof = profile(model)
        return _factor(prof, _exact_vocab(prof), policy, learned)


def _exact_vocab(prof: ModelProfile) -> str | None:
    """The exact tokenizer an open-model family counts with, where its package is installed."""
    return prof.exact_encoding if prof.exact_encoding and exact_available(prof.exact_encoding) else None


def _factor(prof: ModelProfile, exact_vocab: str | None, policy: Policy, learned: Learned | None) -> calibration.Factor:
    """The admin's pin for the family, else its static factor (1.0 with an exact tokenizer), as
    `calibration.factor` raises it with what the provider answers taught (`learned`, not asked of a
    family counted exactly)."""
    static = 1.0 if exact_vocab else prof.default_factor
    pin = policy.calibration.get(prof.family)
    exact_family = (prof.exact or exact_vocab is not None) and pin is None
    ratios: list[float] = []
    miss: float | None = None
    if learned is not None and not exact_family:
        ratios, miss = learned()  # (static mode reads them for counting misses only)
    return calibration.factor(static, ratios, policy.calibration_settings(), pin=pin, missed=miss)
