"""The instance the LiteLLM proxy loads: `litellm_settings: {callbacks: guard.proxy.context_guard}`.

Its policy is the `context_guard:` section of the proxy's own config file, read on first use; its
model limits come from the proxy's router (model_list `model_info`) and LiteLLM's model map. If
the proxy has no `/metrics` endpoint yet (LiteLLM mounts one only with its prometheus callback),
the guard mounts the standard Prometheus exposition there.
"""

from __future__ import annotations

import sys

from guard.callback import ContextGuard

context_guard = ContextGuard()


def _mount_metrics() -> None:
    module = sys.modules.get("litellm.proxy.proxy_server")
    app = getattr(module, "app", None) if module else None
    if app is None or any(getattr(r, "path", None) == "/metrics" for r in app.routes):
        return
    from prometheus_client import make_asgi_app

    app.mount("/metrics", make_asgi_app())


_mount_metrics()
