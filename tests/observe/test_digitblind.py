"""A matcher remembers a line's answer with its numbers ignored only for patterns that cannot tell
one digit from another (bringup/observe/digitblind.py): the answer is the same as asked afresh."""

from __future__ import annotations

import re

import pytest

from bringup.observe.digitblind import digit_blind
from bringup.observe.signatures import Matcher
from bringup.observe.tracebacks import strip_prefix


@pytest.mark.parametrize(
    "pattern, blind",
    [
        (r"exit code -9", False),  # a digit written in the pattern
        (r"\[Errno 98\]", False),
        (r"SM>=80", False),
        (r"[1-5]x", False),  # a class with some digits
        (r"[^0]", False),
        (r"(a)\1", False),  # a backreference compares what it read
        (r"(?:ok|b9)", False),  # inside a branch
        (r"(?P<need>[\d.]+) GiB", True),  # every digit alike
        (r"[A-Za-z0-9._~+/=-]{4,}", True),  # a quantifier's count is no digit of the text
        (r"\w+:\d+\]", True),
        (r"\x1b\[[0-9;]*m", True),
        (r"foo(?=bar)", True),
    ],
)
def test_a_pattern_is_blind_when_no_digit_can_change_its_answer(pattern, blind):
    assert digit_blind(re.compile(pattern)) is blind


def _fresh(m: Matcher, line: str) -> list:
    bare = strip_prefix(line)[0]
    return [s for s in m.signatures if s.regex.search(line) or s.regex.search(bare)]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "transformers", None])
def test_a_remembered_answer_is_the_answer(engine):
    """Lines that differ only in their digits, one of them fatal only for its digits (signal-killed's
    `exit code -9`, address-in-use's `[Errno 98]`): the matcher's memory never changes an answer."""
    m = Matcher(engine)
    lines = [
        "(Worker pid=1) INFO 12-04 10:00:01 [core.py:12] worker exit code -1",
        "(Worker pid=2) INFO 12-04 10:00:02 [core.py:12] worker exit code -9",
        "OSError: [Errno 99] Cannot assign requested address",
        "OSError: [Errno 98] Address already in use",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.50 GiB",
        "[2026-12-04 10:00:01 TP3] FlashAttention v3 Backend requires SM>=80 and SM<=90",
        "[2026-12-04 10:00:01 TP3] FlashAttention v3 Backend requires SM>=70 and SM<=90",
    ]
    for line in lines * 2:
        assert m.match(line) == _fresh(m, line), line
    assert all(digit_blind(s.regex) for s, _ in m._blind)  # only the blind ones are remembered
    assert {s.id for s in m.signatures} == {s.id for s, _ in m._blind} | {s.id for s, _ in m._sensitive}
