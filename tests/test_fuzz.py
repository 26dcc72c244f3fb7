"""A share of the fuzz run (bench/fuzz.py) on every change: malformed and extreme bodies end in a
fit that fits, a rejection or a clear bad-request error, never another exception."""

import json

from bench import fuzz
from guard.core import jsontext


def test_a_share_of_the_fuzz_run_has_no_unhandled_exception(capsys):
    """500 bodies (1,500 until session 55, then 1,000: 55-59 s of CI's 20 minutes, then 700 until
    session 72: 32-35 s; the long runs are bench.fuzz's, docs/reliability.md)."""
    assert fuzz.main(["--bodies", "500", "--seed", "1"]) == 0
    assert "unhandled exceptions: 0" in capsys.readouterr().out


def test_a_share_through_the_proxy_hook_has_no_unhandled_exception(capsys):
    """The proxy's path (pre-call hook with a real UserAPIKeyAuth, then the deployment hook):
    a returned body that fits, the proxy's 400 rejection, or a 400 bad request, nothing else."""
    assert fuzz.main(["--bodies", "400", "--seed", "2", "--target", "hook"]) == 0
    out = capsys.readouterr().out
    assert "unhandled exceptions: 0" in out and "hook:rejected" in out and "hook:bad_request" in out


def test_deeply_nested_json_is_treated_as_text():
    deep = "[" * 3000 + "1" + "]" * 3000
    assert jsontext.parse(deep) is None
    limit = jsontext.MAX_DEPTH
    assert jsontext.parse("[" * limit + "]" * limit) is not None
    assert jsontext.parse("[" * (limit + 1) + "]" * (limit + 1)) is None
    assert jsontext.parse(json.dumps([[i] for i in range(3 * limit)])) is not None  # many brackets, shallow
    assert jsontext.drop_keys(deep, ["metadata"], ["id"]) == deep
    assert jsontext.parse("[" * 10 + "1" + "]" * 10) is not None
