"""Tests of bringup/cli/."""
