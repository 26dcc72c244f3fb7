# The LiteLLM proxy with context-guard installed. Mount your own config over the default one:
#   docker build -t context-guard .
#   docker run -p 4000:4000 -e LITELLM_MASTER_KEY=sk-... \
#     -v "$PWD/proxy_config.yaml:/etc/context-guard/proxy_config.yaml:ro" context-guard
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True

# Install from a throwaway source dir: at run time `guard` must come from site-packages, not from
# a guard/ folder next to the config (LiteLLM would load that file as a second copy of the module).
COPY pyproject.toml README.md /tmp/src/
COPY guard /tmp/src/guard
# LiteLLM at the long-term-support release of the tested range (pyproject.toml): the image is what CI ran in full
ARG LITELLM_VERSION=1.108.7
RUN pip install "/tmp/src[proxy,exact]" "litellm[proxy]==${LITELLM_VERSION}" && rm -rf /tmp/src \
    && useradd --create-home --uid 10001 guard \
    && mkdir -p /var/lib/context-guard/metrics && chown guard /var/lib/context-guard/metrics

# Prometheus multiprocess mode (LiteLLM's own): /metrics sums every worker's counts, so
# `-e NUM_WORKERS=4` needs nothing else; LiteLLM empties the directory at start-up.
ENV PROMETHEUS_MULTIPROC_DIR=/var/lib/context-guard/metrics
# uvicorn restarts a worker that has not answered its health check within 5 s; with several workers
# on a small or busy host, one still importing LiteLLM cannot, and they were restarted in a loop
# (two two-worker proxies starting at once on 2 cores: a new worker every ~10 s, none ready)
ENV TIMEOUT_WORKER_HEALTHCHECK=60

COPY proxy_config.yaml /etc/context-guard/proxy_config.yaml

USER guard
WORKDIR /home/guard
EXPOSE 4000
CMD ["litellm", "--config", "/etc/context-guard/proxy_config.yaml", "--host", "0.0.0.0", "--port", "4000"]
