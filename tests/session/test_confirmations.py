"""A screen that passes is followed by its full launch: the budget keeps room for it (issue 36,
item 5: the seeds' scenario with --parallel auto spent all 12 launches on screens, one of which
passed and was never confirmed)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.session.launching import fits_budget


@dataclass
class D:
    screen: bool


@dataclass
class J:
    screen: bool


def test_a_screen_needs_room_for_its_own_confirmation():
    assert fits_budget(D(screen=True), 2, [], [])
    d = D(screen=True)
    assert fits_budget(d, 1, [], []) and d.screen is False  # one launch left: the full launch itself


def test_screens_in_flight_and_queued_confirmations_keep_their_launches():
    flying = [J(screen=True), J(screen=True), J(screen=False)]
    follow = [J(screen=False)]
    # 4 left: two screens in flight may each need a confirmation, one confirmation is queued
    assert fits_budget(D(screen=False), 4, flying, follow)
    assert not fits_budget(D(screen=False), 3, flying, follow)
    d = D(screen=True)
    assert fits_budget(d, 4, flying, follow) and d.screen is False
    assert fits_budget(D(screen=True), 5, flying, follow)
