"""`context-guard`: fit a request body from the command line; show what calibration learned.

    context-guard fit REQUEST.json [--config LITELLM_CONFIG.yaml] [--model NAME]
                      [--dialect openai|anthropic|responses] [--out FITTED.json|-] [--json]
    context-guard calibration --config LITELLM_CONFIG.yaml [--redis redis://HOST:PORT/0] [--json]
    context-guard agent-env claude-code|codex|opencode|qwen-code --config LITELLM_CONFIG.yaml --model NAME
                      [--team TEAM] [--key-alias ALIAS] [--base-url URL]

Exit status: 0 the result fits (changed or not), 2 rejected (context window exceeded),
1 bad input or usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from guard.core.announce import AGENTS, announce, lines
from guard.core.errors import ContextWindowExceeded, GuardError
from guard.core.policy import Policy
from guard.core.report import Report
from guard.dialects import DIALECTS
from guard.fit.engine import Engine
from guard.fit.planner import Fitted
from guard.shell.config_file import load_config

EXIT_FITS, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2; 2 means "rejected" here
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="context-guard", description="Make LLM requests fit their model's context window.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    fit = sub.add_parser("fit", help="fit a chat-completions, /v1/messages or /v1/responses body")
    fit.add_argument("request", help="request body as JSON ('-' for stdin)")
    fit.add_argument("--config", help="LiteLLM proxy config (model_list model_info, context_guard policy)")
    fit.add_argument("--model", help="model to fit for (default: the body's 'model')")
    fit.add_argument(
        "--dialect", choices=list(DIALECTS), help="body shape: chat, /v1/messages or Responses (default: detected)"
    )
    fit.add_argument("--out", help="write the fitted body here ('-' for stdout)")
    fit.add_argument("--json", action="store_true", help="print the report as one JSON object on stdout")
    cal = sub.add_parser(
        "calibration", help="per deployment: the counting factor in use, its source and the observed ratios"
    )
    cal.add_argument("--config", required=True, help="LiteLLM proxy config (model_list, context_guard policy)")
    cal.add_argument("--redis", help="the shared Redis (default: the config's coordination_redis or cache.redis_url)")
    cal.add_argument("--json", action="store_true", help="one JSON object per deployment")
    env = sub.add_parser(
        "agent-env", help="the settings that tell a coding agent the window the guard enforces for a caller"
    )
    env.add_argument(
        "agent",
        choices=list(AGENTS),
        help="claude-code: shell exports; codex: config.toml lines; opencode: opencode.json; qwen-code: settings.json",
    )
    env.add_argument("--config", required=True, help="the proxy's LiteLLM config (model_list, context_guard policy)")
    env.add_argument("--model", required=True, help="the model name clients send (a model_list model_name)")
    env.add_argument("--team", help="the caller's team id or alias (its policy layer applies)")
    env.add_argument("--key-alias", help="the caller's key alias (its policy layer applies)")
    env.add_argument("--base-url", help="the proxy's URL (default for codex: http://127.0.0.1:4000)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "calibration":
        return calibration_main(args)
    if args.command == "agent-env":
        return agent_env_main(args)
    try:
        raw = sys.stdin.buffer.read() if args.request == "-" else Path(args.request).read_bytes()
    except OSError as e:
        return _fail(f"cannot read {args.request}: {e.strerror}")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        return _fail(f"{args.request} is not valid JSON: {e}")
    try:
        engine = Engine.from_guard_config(load_config(args.config)) if args.config else Engine()
        fitted = engine.fit(body, model=args.model, dialect=args.dialect)
    except ContextWindowExceeded as e:
        report: Report = e.report
        if args.json:
            print(json.dumps({**report.to_dict(), "error": e.render()}))
        else:
            _show(report, error=e.render())
        return EXIT_REJECTED
    except GuardError as e:
        return _fail(str(e))
    if args.out:
        _write(args.out, fitted, raw)
    if args.json:
        print(json.dumps(fitted.report.to_dict()))
    elif args.out != "-":
        _show(fitted.report)
    return EXIT_FITS


def calibration_main(args: argparse.Namespace) -> int:
    """What each deployment of a config is counted with: the factor, where it comes from (static,
    learned, pinned, miss), how many provider answers it learned from and their ratios' quantiles."""
    import asyncio

    import yaml

    from guard.core import calibration
    from guard.core.config import CacheSettings
    from guard.state.cache import SummaryCache
    from guard.state.calibration_store import CalibrationStore

    try:
        cfg = load_config(args.config)
        raw = yaml.safe_load(Path(args.config).read_text()) or {}
    except (GuardError, OSError, yaml.YAMLError) as e:
        return _fail(f"cannot load {args.config}: {e}")
    url = args.redis or _redis_url(raw) or cfg.cache.redis_url
    store = CalibrationStore(SummaryCache(CacheSettings(redis_url=url, memory_entries=0))) if url else None
    engine = Engine.from_guard_config(cfg)

    async def read() -> list[str]:
        assert store is not None
        keys = await store.shared_keys()
        await store.refresh(keys)
        return keys

    shared: list[str] = asyncio.run(read()) if store is not None else []
    if store is not None:
        engine.learned = store.lookup
    rows: list[dict[str, Any]] = []
    for name, deployment in sorted(engine.deployments.items()):
        policy = engine.policy_for(name)
        key = engine.calibration_key(name, deployment)
        _, exact, factor = engine.counter_and_factor(name, policy, deployment.model, key)
        ratios, missed = store.lookup(key) if store is not None else ([], None)
        bounded = [r for r in (calibration.bounded(x, policy.calibration_settings()) for x in ratios) if r is not None]
        rows.append(_calibration_row(name, key, policy, (exact, factor), (bounded, missed)))
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_FITS
    where = (
        f"shared store {url} ({len(shared)} deployments with answers)"
        if store is not None
        else "no shared Redis: static factors only"
    )
    _print_calibrations(rows, where)
    return EXIT_FITS


def _calibration_row(
    name: str, key: str, policy: Policy, counting: tuple[bool, Any], seen: tuple[list[float], float | None]
) -> dict[str, Any]:
    """One deployment's calibration: its key and mode, whether its count is exact (`counting`: and
    its factor), the quantiles of the ratios its provider answered and the factor a counting miss
    set (`seen`)."""
    exact, factor = counting
    bounded, missed = seen
    from guard.core import calibration

    quantiles = {f"p{int(q * 100)}": round(calibration.quantile(bounded, q), 3) for q in (0.5, 0.9, 0.99) if bounded}
    return {
        "deployment": name,
        "key": key,
        "mode": policy.calibration_mode,
        "exact": exact,
        "factor": factor.value,
        "source": "exact" if exact else factor.source,
        "observations": len(bounded),
        "ratio": quantiles,
        "missed": missed,
    }


def _print_calibrations(rows: list[dict[str, Any]], where: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("deployment", "mode", "factor", "source", "answers", "ratio p50 / p90 / p99", "missed at")
    for row in rows:
        q = row["ratio"]
        table.add_row(
            row["deployment"],
            row["mode"],
            f"{row['factor']:.2f}",
            row["source"],
            str(row["observations"]),
            " / ".join(str(q[k]) for k in ("p50", "p90", "p99")) if q else "-",
            f"{row['missed']:.2f}" if row["missed"] else "-",
        )
    console = Console()
    console.print(table)
    console.print(where)


def agent_env_main(args: argparse.Namespace) -> int:
    """Print what `guard.core.announce` derives for one model and caller, in the agent's own terms."""
    try:
        engine = Engine.from_guard_config(load_config(args.config))
        underlying = engine.underlying(args.model)
        policy, _ = engine.policies.resolve((args.model, underlying), team=(args.team,), key=(args.key_alias,))
        limits = engine.limits_for(args.model, policy)
        factor = engine.count_factor(args.model, policy)
    except GuardError as e:
        return _fail(str(e))
    for line in lines(announce(args.model, limits, policy, factor.value), args.agent, base_url=args.base_url):
        print(line)
    return EXIT_FITS


def _redis_url(raw: Any) -> str | None:
    """The proxy's coordination Redis as a URL, from `general_settings.coordination_redis`."""
    general = raw.get("general_settings") if isinstance(raw, dict) else None
    redis = general.get("coordination_redis") if isinstance(general, dict) else None
    if isinstance(redis, str):
        return redis
    if isinstance(redis, dict) and redis.get("host"):
        auth = f":{redis['password']}@" if redis.get("password") else ""
        return f"redis://{auth}{redis['host']}:{redis.get('port', 6379)}/0"
    return None


def _fail(message: str) -> int:
    print(f"context-guard: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _write(target: str, fitted: Fitted, raw: bytes) -> None:
    report = fitted.report
    if report.outcome == "unchanged" and report.max_tokens_requested == report.max_tokens:
        data = raw  # nothing to change: the very bytes that came in
    else:
        data = (json.dumps(fitted.body, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")
    if target == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        Path(target).write_bytes(data)


def _show(report: Report, error: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    b = report.breakdown
    window = report.context_window if report.window_rule == "shared" else report.max_input_tokens
    parts: list[tuple[str, int, str]] = [
        ("system", b.get("system", 0), "magenta"),
        ("history", b.get("history", 0), "cyan"),
        ("tool results", b.get("tool_results", 0), "yellow"),
        ("tools+framing", b.get("tools_and_framing", 0), "blue"),
    ]
    if report.window_rule == "shared":
        parts.append(("reserved output", report.max_tokens, "green"))
    parts.append(("margin", report.safety_margin_tokens, "red"))
    used = sum(n for _, n, _ in parts)
    width = 60
    bar = Text()
    scale = width / max(window, used, 1)
    for _, n, color in parts:
        bar.append("█" * round(n * scale), style=color)
    bar.append("░" * max(0, width - round(used * scale)), style="dim")
    verdict = {"unchanged": "fits as sent", "fitted": "fitted", "rejected": "REJECTED"}[report.outcome]
    console.print(f"[bold]{report.model}[/] ({report.window_rule} window {window:,}): {verdict}")
    console.print(bar, f" {used:,} / {window:,}")
    legend = Text()
    for name, n, color in parts:
        legend.append("■ ", style=color).append(f"{name} {n:,}  ")
    console.print(legend)
    console.print(
        f"input {report.input_tokens_before:,} → {report.input_tokens_after:,} tokens "
        f"(room {report.room:,}, low-water {report.target:,}); "
        f"{report.output_key}={report.max_tokens:,} ({report.max_tokens_source})"
        + ("" if report.exact_count else f"; estimated ×{report.calibration_factor}")  # noqa: RUF001 - the sign is meant
    )
    if report.actions:
        table = Table("action", "items", "tokens saved")
        for a in report.actions:
            table.add_row(a.kind, str(a.items), f"{a.tokens_saved:,}")
        console.print(table)
    for r in report.reasoning:
        after = "removed" if r["after"] is None else r["after"]
        console.print(f"lowered with the output limit: {r['field']} {r['before']} → {after}")
    for s in report.skipped:
        console.print(f"skipped {s.kind}: {s.reason}")
    if error:
        console.print(f"[red]{error}[/]")


def run() -> None:  # pragma: no cover - console entry point
    raise SystemExit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
