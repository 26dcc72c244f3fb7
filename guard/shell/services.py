"""What the LiteLLM adapter's functions (guard.shell.fitting, guard.shell.observing, guard.shell.sync_calls) use of
the guard: its engine, summarizer, stores and router, and one pass over a request. `ContextGuard`
(guard.shell.callback) provides it; the adapter's modules type against this protocol, so they never
import the hook class that imports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from guard.core.config import Deployment
from guard.core.identity import Identity

if TYPE_CHECKING:
    from guard.fit.engine import Engine
    from guard.shell.heavy_fits import HeavyFits
    from guard.shell.routes import Route
    from guard.shell.summarizer import Summarizer
    from guard.state.calibration_store import CalibrationStore
    from guard.state.seen_store import SeenStore


@dataclass(frozen=True)
class Attempt:
    """The terms of one pass over a request: where it runs (proxy, deployment or sdk_sync), who
    sent it, the deployment it goes to when known, whether a body over its room is refused, whether
    this is the request's first pass (`fresh`: a client cannot plant a report), the model group it
    was sent to (`alias`) and the group's context-window fallbacks (`chain`)."""

    where: str
    identity: Identity
    deployment: Deployment | None = None
    reject: bool = True
    fresh: bool = False
    alias: str | None = None
    chain: list[str] | None = None


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
    def heavy_fits(self) -> HeavyFits:
        """The turns of heavy fits (long bodies, fitted off the event loop, a bounded few at once)."""
        ...

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
