"""Tests of bringup/session/."""
