"""The instance the LiteLLM proxy loads: `litellm_settings: {callbacks: guard.proxy.context_guard}`.

Its policy is the `context_guard:` section of the proxy's own config file, read at start-up; its
model limits come from the proxy's router (model_list `model_info`) and LiteLLM's model map. If
the proxy has no `/metrics` endpoint yet (LiteLLM mounts one only with its prometheus callback),
the guard mounts the standard Prometheus exposition there.
"""

from __future__ import annotations

import os
import sys

from guard.callback import ContextGuard, _proxy_config_path

# The proxy reads its config file before it loads callbacks, so the policy is validated here, at
# start-up: an invalid `context_guard:` section stops the proxy with the field named.
context_guard = ContextGuard(config=_proxy_config_path())


def _mount_metrics() -> None:
    module = sys.modules.get("litellm.proxy.proxy_server")
    app = getattr(module, "app", None) if module else None
    if app is None or any(getattr(r, "path", None) == "/metrics" for r in app.routes):
        return
    from prometheus_client import CollectorRegistry, make_asgi_app, multiprocess

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # `litellm --num_workers N`: every worker writes its samples to that directory (LiteLLM's own
        # multiprocess mode); whichever worker answers /metrics sums them all
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        app.mount("/metrics", make_asgi_app(registry))
        return
    app.mount("/metrics", make_asgi_app())


_mount_metrics()
