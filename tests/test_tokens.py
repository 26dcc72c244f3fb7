from __future__ import annotations

import base64
import io
import json
import math
import subprocess
import sys
import wave
from pathlib import Path

import pytest

from bench.traces import blank_png
from guard import Engine
from guard.core.audio import AUDIO_TOKENS_PER_SECOND
from guard.core.encodings import get_encoding
from guard.core.images import (
    anthropic_image_tokens,
    claude_patch_tokens,
    gemini_tile_tokens,
    openai_image_tokens,
)
from guard.core.models import profile
from guard.core.tokens import TokenCounter
from guard.dialects import ANTHROPIC, OPENAI, RESPONSES
from guard.dialects.base import PDF_PAGE_TOKENS
from guard.dialects.messages import MESSAGE_FRAMING as ANTHROPIC_MESSAGE_FRAMING
from guard.dialects.messages import TOOL_BLOCK_FRAMING
from guard.dialects.messages import TOOL_PROMPT as ANTHROPIC_TOOL_PROMPT

O200K = get_encoding("o200k_base")


def enc(text: str) -> int:
    return len(O200K.encode_ordinary(text))


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter(O200K)


def test_plain_messages_follow_openais_accounting(counter):
    msgs = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the capital of France?", "name": "alice"},
    ]
    expected = 3 + enc("system") + enc("You are terse.") + 3 + enc("user") + enc("What is the capital of France?")
    expected += enc("alice") + 1 + 3  # name costs its tokens + 1; +3 primes the reply
    assert counter.body(OPENAI, {"messages": msgs}) == expected


def test_plain_messages_match_litellm_token_counter(counter):
    import litellm

    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! How can I help?"}]
    assert counter.body(OPENAI, {"messages": msgs}) == litellm.token_counter(model="gpt-4o", messages=msgs)


def test_tool_calls_count_name_arguments_and_framing(counter):
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    with_call = {"role": "assistant", "content": None, "tool_calls": [call]}
    plain = {"role": "assistant", "content": None}
    diff = counter.message(OPENAI, with_call) - counter.message(OPENAI, plain)
    assert diff == 3 + enc("read_file") + enc('{"path": "a.py"}')


def test_thinking_blocks_sent_back_in_chat_count_their_thinking_not_their_signature(counter):
    # LiteLLM's chat format for Claude's thinking: the text is billed when kept, the signature (a
    # sealed copy) is not: two real Claude Code sessions carried 47 thinking blocks with 74k
    # characters of signatures and were billed 0.97-1.08x the guard's count without them (bench.usage)
    signature = base64.b64encode(bytes(range(256)) * 3).decode()
    blocks = [{"type": "thinking", "thinking": "Check the imports first.", "signature": signature}]
    plain = {"role": "assistant", "content": "Done."}
    diff = counter.message(OPENAI, {**plain, "thinking_blocks": blocks}) - counter.message(OPENAI, plain)
    assert diff == enc("Check the imports first.")


def test_tool_result_counted_as_serialized(counter):
    pretty = json.dumps({"a": [1, 2, 3], "b": {"c": "d"}}, indent=2)
    compact = json.dumps({"a": [1, 2, 3], "b": {"c": "d"}}, separators=(",", ":"))
    msg = lambda c: {"role": "tool", "tool_call_id": "x", "content": c}  # noqa: E731
    assert (
        counter.message(OPENAI, msg(pretty)) - counter.message(OPENAI, msg(compact)) == enc(pretty) - enc(compact) > 0
    )


def test_tool_schemas_are_counted(counter):
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    base = {"messages": [{"role": "user", "content": "hi"}]}
    assert counter.body(OPENAI, {**base, "tools": tools}) > counter.body(OPENAI, base) + enc("search")


def test_anthropic_blocks_system_and_tool_prompt(counter):
    body = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "x"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "file body here"}]},
        ],
        "tools": [{"name": "read", "input_schema": {"type": "object"}}],
    }
    total = counter.body(ANTHROPIC, body)
    no_tools = counter.body(ANTHROPIC, {k: v for k, v in body.items() if k != "tools"})
    assert total - no_tools >= ANTHROPIC_TOOL_PROMPT
    no_system = counter.body(ANTHROPIC, {k: v for k, v in body.items() if k != "system"})
    assert total - no_system == ANTHROPIC_MESSAGE_FRAMING + enc("Be brief.")
    result_msg = body["messages"][2]
    # (the framing Anthropic bills for a message and a tool block, measured: bench.usage)
    expected = ANTHROPIC_MESSAGE_FRAMING + enc("user") + TOOL_BLOCK_FRAMING + enc("file body here")
    assert counter.message(ANTHROPIC, result_msg) == expected


def test_a_pinned_prompt_in_blocks_is_counted_once(counter):
    """A system prompt (Anthropic) or instructions (Responses) sent as a list costs what its text
    costs, not that plus its JSON."""
    text = "You are a careful assistant who checks every claim. " * 20
    assert counter.fixed(ANTHROPIC, {"system": [{"type": "text", "text": text}]}) == counter.fixed(
        ANTHROPIC, {"system": text}
    )
    listed = counter.fixed(RESPONSES, {"instructions": [{"type": "message", "role": "developer", "content": text}]})
    plain = counter.fixed(RESPONSES, {"instructions": text})
    assert listed == plain  # a string goes as a system message: its framing, its role, its text
    assert plain - counter.fixed(RESPONSES, {}) == 3 + enc("system") + enc(text)


def test_cache_by_content_not_identity(counter):
    msgs = [{"role": "user", "content": f"message {i}"} for i in range(50)]
    counter.messages(OPENAI, msgs)
    hits = counter.hits
    copies = json.loads(json.dumps(msgs)) + [{"role": "user", "content": "new one"}]
    counter.messages(OPENAI, copies)
    assert counter.hits - hits == 50
    assert counter.message(OPENAI, {"role": "user", "content": "message 0 changed"}) != counter.message(OPENAI, msgs[0])


def test_cache_is_bounded():
    c = TokenCounter(O200K, cache_size=10)
    for i in range(100):
        c.message(OPENAI, {"role": "user", "content": str(i)})
    assert len(c._cache) == 10


def test_a_large_batch_is_counted_on_two_threads_with_a_twin_encoder(monkeypatch):
    """A cold request over _PARALLEL_CHARS is split between this thread and the counting thread,
    which encodes with a twin of the encoding (one tiktoken instance on two threads contends
    inside itself): the counts are the ones a single thread gets."""
    import guard.core.encodings
    import guard.core.tokens

    monkeypatch.setattr(guard.core.encodings, "_twins", {})
    monkeypatch.setattr(guard.core.tokens, "_two_cpus", lambda: True)
    assert guard.core.tokens._THREADS == 2  # (the default, `counting_threads: 2`)
    msgs = _large_batch()
    assert sum(len(m["content"]) for m in msgs) > guard.core.tokens._PARALLEL_CHARS
    split = TokenCounter(O200K).messages(OPENAI, msgs)
    twin = guard.core.encodings._twins[id(O200K)][1]  # built by the counting thread, for it
    assert twin is not O200K and guard.core.encodings.twin(O200K) is twin
    assert twin.encode_ordinary(msgs[0]["content"]) == O200K.encode_ordinary(msgs[0]["content"])
    monkeypatch.setattr(guard.core.tokens, "_PARALLEL_CHARS", 10**12)
    assert split == TokenCounter(O200K).messages(OPENAI, msgs)
    assert split == [4 + enc(m["content"]) + enc(m["tool_call_id"]) for m in msgs]


def _large_batch() -> list[dict[str, str]]:
    return [
        {
            "role": "tool",
            "tool_call_id": f"c{i}",
            "content": json.dumps({"i": i, "rows": ["word %d" % j for j in range(400)]}),
        }
        for i in range(60)
    ]


def test_with_one_counting_thread_a_large_batch_is_counted_on_its_own_thread_with_no_twin(monkeypatch):
    """`counting_threads: 1` saves the ~40 MB of a twin encoder in each worker (a busy proxy's
    workers, each on a core, gain nothing from a second thread): the same counts, no thread, no twin."""
    import guard.core.encodings
    import guard.core.tokens

    monkeypatch.setattr(guard.core.encodings, "_twins", {})
    monkeypatch.setattr(guard.core.tokens, "_two_cpus", lambda: True)
    monkeypatch.setattr(guard.core.tokens, "_THREADS", 2)
    guard.core.tokens.set_counting_threads(1)

    def no_pool():
        raise AssertionError("one counting thread started a second")

    monkeypatch.setattr(guard.core.tokens, "_pool", no_pool)
    msgs = _large_batch()
    assert TokenCounter(O200K).messages(OPENAI, msgs) == [4 + enc(m["content"]) + enc(m["tool_call_id"]) for m in msgs]
    assert not TokenCounter(O200K).prepare_threads() and guard.core.encodings._twins == {}
    with pytest.raises(ValueError, match="1 or 2"):
        guard.core.tokens.set_counting_threads(3)


def test_a_process_on_one_cpu_counts_a_large_batch_on_its_own_thread(monkeypatch):
    """A worker pinned to one CPU gains nothing from a second thread, and its twin encoder costs
    ~40 MB: the batch is counted on the calling thread, the same counts."""
    import guard.core.cpus
    import guard.core.tokens

    monkeypatch.setattr(guard.core.cpus.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert guard.core.tokens._THREADS == 2  # (two counting threads, the default, yet one CPU)
    guard.core.tokens._two_cpus.cache_clear()
    try:

        def no_pool():
            raise AssertionError("a one-CPU process started the counting thread")

        monkeypatch.setattr(guard.core.tokens, "_pool", no_pool)
        msgs = _large_batch()
        assert TokenCounter(O200K).messages(OPENAI, msgs) == [
            4 + enc(m["content"]) + enc(m["tool_call_id"]) for m in msgs
        ]
    finally:
        guard.core.tokens._two_cpus.cache_clear()


def _cgroup(tmp_path: Path, own: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (tmp_path / "own").write_text(own)
    return root, tmp_path / "own"


@pytest.mark.parametrize(
    ("own", "files", "quota"),
    [
        ("0::/\n", {"cpu.max": "100000 100000\n"}, 1.0),  # a container limited to one CPU (cgroup v2)
        ("0::/\n", {"cpu.max": "max 100000\n"}, None),
        ("0::/pod/app\n", {"pod/app/cpu.max": "250000 100000\n", "cpu.max": "max 100000\n"}, 2.5),
        # a limit on a parent only (a Kubernetes pod's): it bounds every group under it
        ("0::/pod/app\n", {"pod/app/cpu.max": "max 100000\n", "pod/cpu.max": "150000 100000\n"}, 1.5),
        ("0::/pod/app\n", {"pod/app/cpu.max": "300000 100000\n", "pod/cpu.max": "200000 100000\n"}, 2.0),
        ("0::/pod/app\n", {"pod/app/cpu.max": "50000 100000\n", "pod/cpu.max": "200000 100000\n"}, 0.5),
        ("0::/../x\n", {"cpu.max": "100000 100000\n"}, 1.0),  # a path that climbs out: the root alone
        (
            "4:memory:/x\n2:cpu,cpuacct:/docker/abc\n",  # cgroup v1, the process's own group first
            {
                "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n",
                "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            },
            0.5,
        ),
        (
            "2:cpu,cpuacct:/docker/abc\n",  # v1 as a container sees it: its group at the mount's root
            {"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"},
            3.0,
        ),
        ("2:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        (
            "2:cpu,cpuacct:/kubepods/pod1/c1\n",  # v1, the limit on the pod's group above the container's
            {
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "-1\n",
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us": "100000\n",
                "cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us": "75000\n",
                "cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us": "100000\n",
            },
            0.75,
        ),
        ("0::/\n", {}, None),  # nothing to read
        ("0::/\n", {"cpu.max": "garbage\n"}, None),
    ],
)
def test_a_containers_cpu_quota_is_read_from_its_cgroup(tmp_path, own, files, quota):
    """A CPU limit set by a CPU quota (Kubernetes `limits.cpu`, `docker run --cpus`) does not show in
    the CPU set: the guard reads it from the process's cgroup and those above it, v2 or v1, and
    takes the smallest."""
    from guard.core import cpus

    root, own_file = _cgroup(tmp_path, own, files)
    assert cpus.cpu_quota(root, own_file) == quota
    expected = cpus.usable(tmp_path / "none", own_file)  # (no cgroup files: the CPU set alone)
    assert cpus.usable(root, own_file) == (expected if quota is None else min(expected, quota))


def test_a_worker_whose_quota_is_under_two_cpus_counts_on_one_thread(monkeypatch, tmp_path):
    import guard.core.cpus
    import guard.core.tokens

    root, own = _cgroup(tmp_path, "0::/\n", {"cpu.max": "150000 100000\n"})
    monkeypatch.setattr(guard.core.cpus.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(guard.core.cpus, "CGROUP", root)
    monkeypatch.setattr(guard.core.cpus, "OWN", own)
    guard.core.tokens._two_cpus.cache_clear()
    try:
        assert guard.core.cpus.usable() == 1.5
        assert not guard.core.tokens._two_cpus()
        (root / "cpu.max").write_text("200000 100000\n")
        guard.core.tokens._two_cpus.cache_clear()
        assert guard.core.tokens._two_cpus()
    finally:
        guard.core.tokens._two_cpus.cache_clear()


def test_an_encodings_python_ranks_are_read_again_only_when_needed():
    """tiktoken keeps a Python copy of the ranks its Rust encoder already holds (~28 MB for
    o200k_base); the guard leaves it to be read again on first use: a pickled or copied encoding
    and a twin encode as the original does."""
    import copy
    import pickle

    from guard.core.encodings import Ranks, load_ranks, twin

    ranks = O200K._mergeable_ranks
    assert isinstance(ranks, Ranks)
    text = 'héllo wörld, 東京 {"k": [1, 2]}'
    for other in (pickle.loads(pickle.dumps(O200K)), copy.deepcopy(O200K), twin(O200K)):
        assert other.encode_ordinary(text) == O200K.encode_ordinary(text)
    plain = copy.deepcopy(ranks)
    assert type(plain) is dict and plain == load_ranks("o200k_base") and len(plain) == len(ranks) > 199_000


def test_calibration_inflates_text_not_images():
    plain = TokenCounter(O200K)
    inflated = TokenCounter(O200K, factor=1.25)
    msg = {"role": "user", "content": "some words to count " * 20}
    assert inflated.message(OPENAI, msg) == -(-plain.message(OPENAI, msg) * 5 // 4)
    # a learned factor may be below 1 (a tokenizer leaner than the stand-in), never zero or negative
    assert TokenCounter(O200K, factor=0.8).message(OPENAI, msg) < plain.message(OPENAI, msg)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            TokenCounter(O200K, factor=bad)


def test_a_chat_file_part_counts_its_pdf_pages_not_its_base64():
    """A chat `file` part with a PDF inline costs its pages, as a Responses `input_file` and an
    Anthropic `document` do (its base64 counted as text refused a short PDF in a 128k window)."""
    oc = TokenCounter(O200K, image_formula="openai")
    pdf = base64.b64encode(b"%PDF-1.4 /Type /Page /Type /Page" + bytes(range(256)) * 2000).decode()
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{pdf}"}}
    empty = oc.message(OPENAI, {"role": "user", "content": []})
    assert oc.message(OPENAI, {"role": "user", "content": [part]}) - empty == 2 * PDF_PAGE_TOKENS
    assert len(O200K.encode_ordinary(pdf)) > 10 * PDF_PAGE_TOKENS
    by_id = {"type": "file", "file": {"file_id": "file-1"}}
    assert 0 < oc.message(OPENAI, {"role": "user", "content": [by_id]}) - empty < 50


def test_a_file_sent_by_reference_makes_the_count_a_lower_bound():
    """A PDF by URL or file id: the provider reads its pages, the guard sees the reference. The
    report names it (`unseen_state: file_reference`); a file inline does not."""
    from guard import Engine, load_policy_set

    engine = Engine(load_policy_set({}))
    by_id = {"type": "document", "source": {"type": "file", "file_id": "file_011"}}
    by_url = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    inline = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}}
    chat_file = {"type": "file", "file": {"file_id": "file-abc"}}
    responses_file = {"type": "input_file", "file_url": "https://example.com/a.pdf"}
    answered = {"type": "tool_result", "tool_use_id": "t", "content": [by_url]}
    cases = [
        (
            "anthropic",
            {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [by_id]}]},
            True,
        ),
        (
            "anthropic",
            {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [inline]}]},
            False,
        ),
        (
            "anthropic",
            {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [answered]}]},
            True,
        ),
        ("openai", {"model": "gpt-4o", "messages": [{"role": "user", "content": [chat_file]}]}, True),
        ("openai", {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, False),
        ("responses", {"model": "gpt-4o", "input": [{"role": "user", "content": [responses_file]}]}, True),
    ]
    for dialect, body, unseen in cases:
        assert (engine.fit(body, dialect=dialect).report.unseen_state == ["file_reference"]) is unseen, body


def _wav(seconds: float, rate: int = 16_000) -> str:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x01\x00" * int(seconds * rate))
    return base64.b64encode(buf.getvalue()).decode()


def test_an_audio_part_counts_its_duration_not_its_base64():
    """A chat `input_audio` part costs its clip's length (`AUDIO_TOKENS_PER_SECOND`, an upper
    bound): a WAV clip's from its header, exactly; another format's from its size at the lowest
    bitrate speech is sent at, never less than its real length. Counted as text, a 30-second WAV
    clip was ~870k tokens, refused by every 128k-400k window."""
    oc = TokenCounter(O200K)
    empty = oc.message(OPENAI, {"role": "user", "content": []})

    def cost(data: str, fmt: str) -> int:
        part = {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}
        return oc.message(OPENAI, {"role": "user", "content": [part]}) - empty

    clip = _wav(30)
    assert cost(clip, "wav") == 30 * AUDIO_TOKENS_PER_SECOND
    assert cost(_wav(30, rate=48_000), "wav") == 30 * AUDIO_TOKENS_PER_SECOND
    assert len(O200K.encode_ordinary(clip)) > 100 * cost(clip, "wav")
    mp3 = base64.b64encode(b"ID3" + bytes(range(256)) * 240).decode()  # 61 kB: 30 s at 16 kbps
    assert cost(mp3, "mp3") == math.ceil(len(base64.b64decode(mp3)) * 8 / 16_000 * AUDIO_TOKENS_PER_SECOND)
    by_id = {"type": "input_audio", "input_audio": {"format": "wav"}}  # no data: its JSON
    assert oc.message(OPENAI, {"role": "user", "content": [by_id]}) > empty


def test_image_formulas_use_the_real_size():
    assert openai_image_tokens(1024, 1024) == 765  # OpenAI's documented example
    assert openai_image_tokens(2048, 4096) == 1105  # scaled to 768x1536: 2x3 tiles
    assert openai_image_tokens(1024, 1024, "low") == 85
    assert anthropic_image_tokens(1000, 1000) == 1334  # the area rule, over the patch rule's 36 x 36
    assert anthropic_image_tokens(200, 200) == 64  # the patch rule, 8 x 8, over the area rule's 54
    oc = TokenCounter(O200K, image_formula="openai")
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + blank_png(1024, 1024)}}
    text_only = oc.message(OPENAI, {"role": "user", "content": []})
    assert oc.message(OPENAI, {"role": "user", "content": [part]}) - text_only == 765
    remote = {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}}
    assert oc.message(OPENAI, {"role": "user", "content": [remote]}) - text_only == 1445  # unknown size: the maximum
    ac = TokenCounter(O200K, image_formula="anthropic")
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": blank_png(200, 200)}}
    empty = ac.message(ANTHROPIC, {"role": "user", "content": []})
    assert ac.message(ANTHROPIC, {"role": "user", "content": [block]}) - empty == 64
    broken = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "not-an-image"}}
    assert ac.message(ANTHROPIC, {"role": "user", "content": [broken]}) - empty == 1600


def test_newer_models_count_images_as_their_providers_do():
    """Claude from 4.7 on reads images up to 2576 px (4,784 tokens) where older ones stop at 1568 px
    (~1,600); Gemini 3 bills a fixed budget per image, Gemini 2.5 258 an image, Gemini 2.0 258 a tile
    and 258 for the whole; OpenAI's
    GPT-4o mini and its patch models bill far more than GPT-4o's tiles. The earlier formulas (w*h/750
    at most 1,600; 85 + 170 a tile for every OpenAI model) were up to 3x under on a new Claude, 12x
    on a 256-px image sent to Gemini 3, 33x on GPT-4o mini."""
    assert profile("claude-opus-4-7").image_formula == "claude-2576"
    assert profile("anthropic/claude-sonnet-5").image_formula == "claude-2576"
    assert profile("claude-sonnet-4-20250514").image_formula == "anthropic"  # 4.0, not a date
    assert profile("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0").image_formula == "anthropic"
    assert profile("claude-opus-4-6").image_formula == "anthropic"
    assert profile("gemini/gemini-3-pro-preview").image_formula == "gemini-3"
    assert profile("vertex_ai/gemini-2.5-flash").image_formula == "gemini-2.5"
    assert profile("gemini/gemini-2.0-flash").image_formula == "gemini-tiles"
    assert profile("gemini-exp-1206").image_formula == "gemini"  # no version: the largest of them
    # the documented examples: 1920x1080 is 69 x 39 patches at 2576 px, 1568 tokens at 1568 px
    assert claude_patch_tokens(1920, 1080, "claude-2576") == 2691
    assert anthropic_image_tokens(1920, 1080) == 1600
    assert claude_patch_tokens(4032, 3024, "claude-2576") == 4784  # shrunk to the cap
    # Gemini 2.0, as billed (bench.usage): tiles of the short side / 1.5 (256-768 px) and the whole
    assert gemini_tile_tokens(384, 384) == 258
    assert gemini_tile_tokens(640, 480) == 5 * 258  # tiles of 320 px: 2 x 2, and the whole
    assert gemini_tile_tokens(540, 360) == 7 * 258  # tiles of 256 px: 3 x 2
    assert gemini_tile_tokens(3008, 2000) == 13 * 258  # tiles of 768 px: 4 x 3
    assert gemini_tile_tokens(4000, 3000) == 13 * 258  # scaled to 3072 x 2304 first
    photo = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + blank_png(1920, 1080)}}
    icon = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + blank_png(256, 256)}}
    remote = {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}}

    def image(formula: str, part: dict, detail: str | None = None) -> int:
        c = TokenCounter(O200K, image_formula=formula)
        if detail:
            part = {**part, "image_url": {**part["image_url"], "detail": detail}}
        return c.message(OPENAI, {"role": "user", "content": [part]}) - c.message(
            OPENAI, {"role": "user", "content": []}
        )

    assert image("claude-2576", photo) == 2691 > image("anthropic", photo) == 1600
    assert image("claude-2576", remote) == 4784  # unknown size: the tier's cap
    assert image("gemini-3", icon) == 1120 and image("gemini-3", icon, "low") == 280
    assert image("gemini-3", photo, "ultra_high") == 2240
    assert image("gemini-tiles", icon) == 258 and image("gemini-tiles", photo) == 7 * 258
    assert image("gemini-tiles", remote) == 25 * 258  # the most any size gives
    assert image("gemini-2.5", photo) == 258 and image("gemini-2.5", photo, "high") == 256 + 2048
    assert image("gemini", icon) == 1120 and image("gemini", photo) == 7 * 258
    # OpenAI: GPT-4o mini's tiles cost 33x GPT-4o's; the patch models bill 32-px patches times a
    # multiplier, up to a budget by detail (the guide's examples: GPT-4.1 mini, 1024x1024: 1,659;
    # GPT-5.4, 1024x1024: 1,229, 2048x2048 at high: 3,000)
    assert profile("gpt-4o-mini-2024-07-18").image_formula == "openai-4o-mini"
    assert profile("gpt-4.1-mini").image_formula == "openai-patches-early-1.62"
    assert profile("gpt-5.4").image_formula == "openai-patches-5.4-1.2"
    assert profile("gpt-6-astra").image_formula == "openai-patches-5.6-1.2"  # not in the table yet: newest rules
    assert profile("azure/gpt-4o").image_formula == "openai" and profile("gpt-5").image_formula == "openai-5"
    big = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + blank_png(2048, 2048)}}
    square = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + blank_png(1024, 1024)}}
    assert image("openai", square) == 765 and image("openai-4o-mini", square) == 2833 + 4 * 5667
    assert image("openai-4o-mini", square, "low") == 2833
    assert image("openai-patches-early-1.62", square) == 1659
    assert image("openai-patches-5.4-1.2", square) == 1229
    assert image("openai-patches-5.4-1.2", big, "high") == 3000
    assert image("openai-patches-5.5-1.2", big) == math.ceil(64 * 64 * 1.2)  # auto: the full size
    assert image("openai-patches-5.6-1.2", remote) == 36_000  # unknown size: 30,000 patches
    assert image("openai-patches-5.6-1.2", remote, "low") == 308
    engine = Engine()
    for model, formula in (("claude-opus-4-8", "claude-2576"), ("gemini/gemini-3-flash", "gemini-3")):
        assert engine.counter_for(model, engine.policy_for(model))[0].image_formula == formula


def test_long_runs_are_split_and_never_under_counted(counter):
    run = "ab" * 4500  # one 9,000-character token piece: exact BPE is slow but still feasible here
    assert counter.raw(run) >= enc(run)
    text = "normal words " * 100 + run + " more words " * 100
    assert counter.raw(text) >= enc(text)
    assert counter.raw("x" * 300_000) > 0  # completes: bounded work per piece


def test_pdf_documents_cost_per_page(counter):
    pdf = b"%PDF-1.4 /Type /Pages /Type /Page /Type /Page /Type /Page"
    block = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(pdf).decode()},
    }
    empty = counter.message(ANTHROPIC, {"role": "user", "content": []})
    assert counter.message(ANTHROPIC, {"role": "user", "content": [block]}) - empty == 3 * 3000


def test_cache_keys_cover_every_counted_field(counter):
    def call(args, name="f", cid="1"):
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}],
        }

    assert counter.message(OPENAI, call('{"a": 1}')) != counter.message(OPENAI, call('{"a": 1, "b": [1, 2, 3]}'))
    assert counter.message(OPENAI, call("{}", name="short")) != counter.message(
        OPENAI, call("{}", name="a_much_longer_function_name")
    )
    assert counter.message(OPENAI, call("{}", cid="1")) == counter.message(
        OPENAI, call("{}", cid="2")
    )  # ids are not sent as tokens
    parts = lambda t: {"role": "user", "content": [{"type": "text", "text": t}]}  # noqa: E731
    assert counter.message(OPENAI, parts("one")) != counter.message(OPENAI, parts("one two three four"))
    blocks = lambda t: {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": t}]}  # noqa: E731
    assert counter.message(ANTHROPIC, blocks("a")) != counter.message(ANTHROPIC, blocks("a b c d e f"))


def test_each_dialects_blocks_count_by_their_own_rule_in_any_body(counter):
    """The dialects name their blocks (guard.dialects.base.counts_blocks); a body of one dialect
    may carry another's, and a block no dialect names, or one whose field is not text, counts as
    its compact JSON."""
    from guard.core.content import compact_json
    from guard.dialects.base import count_parts

    raw = counter.raw
    use = {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "def main"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "main.py:3"}]}
    cases = {
        "text": ({"type": "text", "text": "hello there"}, raw("hello there")),
        "input_text": ({"type": "input_text", "text": "hi"}, raw("hi")),
        "output_text": ({"type": "output_text", "text": "done"}, raw("done")),
        "tool_use": (use, TOOL_BLOCK_FRAMING + raw("grep") + raw(compact_json({"pattern": "def main"}))),
        "tool_result": (result, TOOL_BLOCK_FRAMING + raw("main.py:3")),
        "thinking": ({"type": "thinking", "thinking": "let me see"}, raw("let me see")),
        "redacted_thinking": ({"type": "redacted_thinking", "data": "abc=="}, raw("abc==")),
        "document": ({"type": "document", "source": {"type": "text", "data": "a text doc"}}, raw("a text doc")),
    }
    for kind, (block, expected) in cases.items():
        assert count_parts(counter, [block]) == (expected, 0), kind
    odd = [{"type": "thinking", "thinking": 7}, {"type": "text", "text": None}, {"type": "no_such_block", "x": 1}]
    for block in odd:
        assert count_parts(counter, [block]) == (raw(compact_json(block)), 0)
    # an Anthropic block inside a chat body counts as it would in an Anthropic one
    assert counter.message(OPENAI, {"role": "user", "content": [use]}) > counter.message(
        OPENAI, {"role": "user", "content": ""}
    )


_TWIN_RSS = """
import sys
import guard.core.encodings as enc
if sys.argv[1] == "keep":
    enc.give_back_free_memory = lambda: None
def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
e = enc.get_encoding("o200k_base")
before = rss()
enc.twin(e).encode_ordinary("warm")
print(rss() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the resident size from /proc")
def test_building_a_twin_encoder_gives_its_temporaries_back_to_the_system():
    """Building a tiktoken encoder leaves the freed pages of its temporaries in the process (glibc
    keeps them): the guard hands them back after each build, so a worker's twin encoder costs what
    it holds, several MB less (o200k_base: ~14 MB less on this machine)."""
    from guard.core.encodings import _malloc_trim

    if _malloc_trim() is None:
        pytest.skip("no malloc_trim in this C library")

    def grown(how: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", _TWIN_RSS, how],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        return int(out.stdout.strip())

    kept, given_back = grown("keep"), grown("give")
    assert given_back < kept - 5_000, (kept, given_back)  # kB
