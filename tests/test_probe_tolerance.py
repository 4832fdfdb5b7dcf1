"""Batch invariance: where greedy outputs may part (numerics) and where they may not (a wrong kernel)."""

from __future__ import annotations

from bringup.verify.probes import common_prefix, near_tie_divergence


def test_parting_at_once_is_a_wrong_kernel():
    ref, batched = ["The", " cat", " sat"], ["A", " dog", " ran"]
    assert common_prefix(ref, batched) == 0 and not near_tie_divergence(ref, 0)
    # the scenario engine's `inconsistent` mode parts after 2 tokens: still wrong
    assert not near_tie_divergence(ref, 2)


def test_parting_after_a_shared_prefix_is_numerics():
    ref = ["a", "b", "c", "d", "e", "f"]
    batched = ["a", "b", "c", "d", "e", "x"]
    assert common_prefix(ref, batched) == 5 and near_tie_divergence(ref, 5)


def test_text_is_measured_in_characters():
    # Seen on the H200 (transformers serve, continuous batching, random 8 B model): parted after 12 characters.
    ref, batched = "lease senleaefzgrees la at Co", "lease senlea\ufffd sha hastse Par"
    agree = common_prefix(ref, batched)
    assert agree == 12 and near_tie_divergence(ref, agree)
    assert not near_tie_divergence("lease", common_prefix("lease", "leaf"))
