"""A share of the fuzz run (bench/fuzz.py) on every change: malformed and extreme bodies end in a
fit that fits, a rejection or a clear bad-request error, never another exception."""

from bench import fuzz
from guard import jsontext


def test_a_share_of_the_fuzz_run_has_no_unhandled_exception(capsys):
    assert fuzz.main(["--bodies", "1500", "--seed", "1"]) == 0
    assert "unhandled exceptions: 0" in capsys.readouterr().out


def test_deeply_nested_json_is_treated_as_text():
    deep = "[" * 3000 + "1" + "]" * 3000
    assert jsontext.parse(deep) is None
    assert jsontext.drop_keys(deep, ["metadata"], ["id"]) == deep
    assert jsontext.parse("[" * 10 + "1" + "]" * 10) is not None
