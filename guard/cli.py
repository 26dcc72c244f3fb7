"""`context-guard`: fit a request body from the command line.

    context-guard fit REQUEST.json [--config LITELLM_CONFIG.yaml] [--model NAME]
                      [--dialect openai|anthropic] [--out FITTED.json|-] [--json]

Exit status: 0 the result fits (changed or not), 2 rejected (context window exceeded),
1 bad input or usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

from guard.engine import Engine
from guard.errors import ContextWindowExceeded, GuardError
from guard.planner import Fitted
from guard.report import Report

EXIT_FITS, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2; 2 means "rejected" here
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="context-guard", description="Make LLM requests fit their model's context window.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    fit = sub.add_parser("fit", help="fit a chat-completions or /v1/messages body")
    fit.add_argument("request", help="request body as JSON ('-' for stdin)")
    fit.add_argument("--config", help="LiteLLM proxy config (model_list model_info, context_guard policy)")
    fit.add_argument("--model", help="model to fit for (default: the body's 'model')")
    fit.add_argument("--dialect", choices=["openai", "anthropic"], help="body shape (default: detected)")
    fit.add_argument("--out", help="write the fitted body here ('-' for stdout)")
    fit.add_argument("--json", action="store_true", help="print the report as one JSON object on stdout")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        raw = sys.stdin.buffer.read() if args.request == "-" else Path(args.request).read_bytes()
    except OSError as e:
        return _fail(f"cannot read {args.request}: {e.strerror}")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        return _fail(f"{args.request} is not valid JSON: {e}")
    try:
        engine = Engine.from_config(args.config, resolver=_litellm_resolver) if args.config else Engine(resolver=_litellm_resolver)
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


def _litellm_resolver(model: str) -> Any:
    """LiteLLM's own model resolution, for names LiteLLM's map does not hold exactly; LiteLLM is
    imported on first use only (a few seconds), so common names stay fast."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from guard.callback import litellm_model_info
    except ImportError:  # the core installed without LiteLLM: the raw map decides
        return None
    return litellm_model_info(model)


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
        + ("" if report.exact_count else f"; estimated ×{report.calibration_factor}")
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
