"""The front door (issue 37): a README of at most 10,000 characters whose relative links resolve,
a policy reference generated from the code and up to date, and a docs site that builds with
`mkdocs build --strict` (no broken link or anchor between its pages)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_is_an_entry_and_its_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 10_000, len(text)
    links = [target for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) if "://" not in target]
    assert links, "the README links to the docs"
    missing = [target for target in links if not (ROOT / target).exists()]
    assert not missing, missing


def test_the_policy_reference_is_generated_from_the_policy_model():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "policy_reference.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    from guard.core.policy import Policy

    reference = (ROOT / "docs" / "policy-reference.md").read_text(encoding="utf-8")
    assert all(f"| `{name}` |" in reference for name in Policy.model_fields)


def test_the_docs_site_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "site" / "glossary" / "index.html").exists()
