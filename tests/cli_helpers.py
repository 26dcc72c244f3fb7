from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(sys.executable).parent / "context-guard"
FIXTURES = Path(__file__).parent / "fixtures"


def run_cli(*args: str, body: Any = None, tmp: Path | None = None) -> tuple[int, str, str, Any]:
    """Run the installed console script; returns (status, stdout, stderr, fitted body or None)."""
    argv = [str(SCRIPT), *args]
    out_path = None
    if body is not None:
        assert tmp is not None
        req = tmp / "request.json"
        req.write_text(json.dumps(body))
        out_path = tmp / "fitted.json"
        argv = [str(SCRIPT), "fit", str(req), "--out", str(out_path), *args]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=300,
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"},
    )
    fitted = json.loads(out_path.read_text()) if out_path is not None and out_path.exists() else None
    return proc.returncode, proc.stdout, proc.stderr, fitted
