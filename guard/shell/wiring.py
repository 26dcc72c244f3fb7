"""What a guard is built from and owns: its engine (from a config file, policies or one given),
summarizer, summary cache, calibration and conversation stores, and the Router it routes with.
`ContextGuard` (guard.shell.callback) is this plus the table of LiteLLM's hooks; the adapter's
functions see it through the `Services` protocol (guard.shell.services)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import litellm

from guard.core.config import CacheSettings, GuardConfig, HeavyFitSettings, SummarizerSettings, WorkerSettings
from guard.core.modelmap import litellm_resolver
from guard.core.policy import PolicySet, load_policy_set
from guard.fit.engine import Engine
from guard.shell import fitting, startup
from guard.shell.config_file import load_config
from guard.shell.heavy_fits import HeavyFits
from guard.shell.routes import Route
from guard.shell.services import Attempt
from guard.shell.summarizer import Call, Summarizer, Summarizing
from guard.state.cache import SummaryCache
from guard.state.calibration_store import CalibrationStore
from guard.state.seen_store import SeenStore


class GuardServices:
    """The services of one guard, built lazily (in the proxy, from its config file on first use)."""

    def __init__(  # noqa: PLR0913 - the public constructor's keywords
        self,
        policies: PolicySet | Mapping[str, Any] | None = None,
        *,
        config: str | None = None,
        engine: Engine | None = None,
        summarizer: Summarizing | SummarizerSettings | Mapping[str, Any] | None = None,
        cache: SummaryCache | CacheSettings | Mapping[str, Any] | None = None,
        router: Any = None,
        heavy_fits: HeavyFitSettings | Mapping[str, Any] | None = None,
        **moved: Any,
    ) -> None:
        """`summarizer`: its settings, or a `Summarizing` (settings and the LLM call it makes).
        `heavy_fits`: how long bodies are fitted (`HeavyFitSettings`; by default the config file's
        `context_guard.heavy_fits`, else its defaults). The keyword `summarize_call` is deprecated
        since 0.3.0: `summarizer=Summarizing(settings, call)`."""
        super().__init__()  # (the next class of the hook class: LiteLLM's CustomLogger)
        summarize_call: Call | None = moved.pop("summarize_call", None)
        if moved:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(moved))}")
        if summarize_call is not None:
            warnings.warn(
                "ContextGuard(summarize_call=...) is deprecated since context-guard 0.3.0 and goes in 0.4.0: "
                "use ContextGuard(summarizer=Summarizing(settings, call))",
                DeprecationWarning,
                stacklevel=3,
            )
        if isinstance(summarizer, Summarizing):
            summarize_call = summarizer.call or summarize_call
            summarizer = summarizer.settings
        self._router = router
        self._config_path = config
        self._engine = engine
        self._policies = policies if isinstance(policies, PolicySet) or policies is None else load_policy_set(policies)
        self._summarizer_settings = (
            SummarizerSettings.model_validate(summarizer) if isinstance(summarizer, Mapping) else summarizer
        )
        self._cache = cache if isinstance(cache, SummaryCache) else None
        settings = CacheSettings.model_validate(cache) if isinstance(cache, Mapping) else cache
        self._cache_settings = settings if isinstance(settings, CacheSettings) else None
        self._summarize_call = summarize_call
        given = HeavyFitSettings.model_validate(heavy_fits) if isinstance(heavy_fits, Mapping) else heavy_fits
        self._heavy_given = given is not None
        self._heavy_fits = HeavyFits(given)
        self._worker = WorkerSettings()
        self._summarizer: Summarizer | None = None
        self._misses: dict[str, None] = {}  # call ids already counted as counting misses
        self._calibrations: CalibrationStore | None = None
        self._conversations: SeenStore | None = None
        if engine is None and (config is not None or policies is not None):
            self._build()
        elif engine is not None:
            self._build_summarizer(None)

    def _build(self) -> None:
        if self._config_path is not None:
            cfg = load_config(self._config_path)
            startup.check_config(self._config_path, os.environ)  # settings that route around the hooks, said once
            if not self._heavy_given:
                self._heavy_fits = HeavyFits(cfg.heavy_fits)
            self._worker = cfg.worker
        else:
            cfg = GuardConfig(self._policies or PolicySet(), {})
        self._engine = Engine(
            cfg.policies, deployments=cfg.deployments, model_map=litellm.model_cost, resolver=litellm_resolver
        )
        self._build_summarizer(cfg)

    def _build_summarizer(self, cfg: GuardConfig | None) -> None:
        settings = self._summarizer_settings or (cfg.summarizer if cfg else None)
        cache_settings = self._cache_settings or (cfg.cache if cfg else None)
        if self._cache is None:
            self._cache = SummaryCache(cache_settings)
        if self._calibrations is None:
            self._calibrations = CalibrationStore(self._cache)
        if self._engine is not None and self._engine.learned is None:
            self._engine.learned = self._calibrations.lookup
        if self._engine is not None and self._conversations is None:
            self._conversations = SeenStore(self._cache, self._engine.conversations)
        if settings is not None and self._engine is not None:
            self._summarizer = Summarizer(settings, self._engine, self._cache, call=self._summarize_call)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._config_path = self._config_path or fitting.proxy_config_path()
            self._build()
        assert self._engine is not None
        return self._engine

    def router(self) -> Any:
        """The LiteLLM Router whose groups and context_window_fallbacks the guard routes with: the
        one given to the constructor (`router=`) or to `wrap`/`instrument`, else the proxy's."""
        return self._router if self._router is not None else fitting.proxy_router()

    def use_router(self, router: Any) -> None:
        self._router = router

    def own_router(self) -> Any:
        """The Router given to this guard (`router=`, `wrap`, `instrument`); None if none was."""
        return self._router

    @property
    def misses(self) -> dict[str, None]:
        """Call ids already counted as counting misses (see guard.shell.observing)."""
        return self._misses

    @property
    def summarizer(self) -> Summarizer | None:
        self.engine  # noqa: B018 - built with the engine
        return self._summarizer

    @property
    def heavy_fits(self) -> HeavyFits:
        """The turns of heavy fits (see guard.shell.heavy_fits): the config file's settings once read."""
        self.engine  # noqa: B018 - the config file read with the engine
        return self._heavy_fits

    @property
    def worker(self) -> WorkerSettings:
        """What the guard does to a proxy worker it loads in: the config file's `context_guard.worker`."""
        self.engine  # noqa: B018 - the config file read with the engine
        return self._worker

    @property
    def conversations(self) -> SeenStore:
        """When each conversation was last sent (cache temperature), shared through Redis."""
        self.engine  # noqa: B018 - built with the engine
        assert self._conversations is not None
        return self._conversations

    @property
    def calibrations(self) -> CalibrationStore:
        self.engine  # noqa: B018 - built with the engine
        assert self._calibrations is not None
        return self._calibrations

    async def _guard(self, data: dict[str, Any], route: Route, attempt: Attempt) -> dict[str, Any]:
        return await fitting.fit(self, data, route, attempt)  # one pass; the hooks call it through the instance
