"""Tests of bringup/core/."""
