"""Send an oversized agent conversation to the running proxy and show what the guard did.

LITELLM_MASTER_KEY=sk-... .venv/bin/python -m bench.send_demo [--url http://127.0.0.1:4000]
"""

from __future__ import annotations

import argparse
import os

import openai

from bench.traces import agent_trace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default=f"http://127.0.0.1:{os.environ.get('PORT', '4000')}")
    parser.add_argument("--model", default="demo")
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    key = os.environ.get("LITELLM_MASTER_KEY")
    if not key:
        raise SystemExit("set LITELLM_MASTER_KEY to the proxy's key (./scripts/serve.sh prints the one it generated)")
    client = openai.OpenAI(base_url=args.url, api_key=key, max_retries=0)
    messages = agent_trace(turns=args.turns, scale=0.05)["messages"]
    print(f"sending {len(messages)} messages to {args.model!r} (window 8,192 tokens in the demo config)")
    raw = client.chat.completions.with_raw_response.create(model=args.model, messages=messages)
    for name, value in sorted(raw.headers.items()):
        if name.startswith("x-context-guard-"):
            print(f"  {name}: {value}")
    print("reply:", raw.parse().choices[0].message.content)
    try:
        client.chat.completions.create(model=args.model, messages=[{"role": "user", "content": "word " * 20000}])
    except openai.BadRequestError as e:
        print(
            "a hopeless request is refused before the provider:",
            e.status_code,
            e.body.get("message", e.body) if isinstance(e.body, dict) else e.body,
        )


if __name__ == "__main__":
    main()
