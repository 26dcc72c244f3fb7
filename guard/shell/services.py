"""What the LiteLLM adapter's functions (guard.shell.fitting, guard.shell.observing, guard.shell.sync_calls) use of
the guard: its engine, summarizer, stores and router, and one pass over a request. `ContextGuard`
(guard.shell.callback) provides it; the adapter's modules type against this protocol, so they never
import the hook class that imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from guard.fit.engine import Engine
    from guard.shell.fitting import Attempt
    from guard.shell.routes import Route
    from guard.shell.summarizer import Summarizer
    from guard.state.calibration_store import CalibrationStore
    from guard.state.seen_store import SeenStore


class Services(Protocol):
    @property
    def engine(self) -> Engine: ...

    @property
    def summarizer(self) -> Summarizer | None: ...

    @property
    def calibrations(self) -> CalibrationStore: ...

    @property
    def conversations(self) -> SeenStore: ...

    @property
    def misses(self) -> dict[str, None]:
        """Call ids already counted as counting misses."""
        ...

    def router(self) -> Any:
        """The LiteLLM Router the guard routes with (its own, else the proxy's)."""
        ...

    def own_router(self) -> Any:
        """The Router given to the guard itself (None: none given)."""
        ...

    def use_router(self, router: Any) -> None: ...

    async def _guard(self, data: dict[str, Any], route: Route, attempt: Attempt) -> dict[str, Any]:
        """One pass over a request (see guard.shell.fitting.fit)."""
        ...
