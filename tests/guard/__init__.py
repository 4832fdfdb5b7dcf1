"""Tests of bringup/guard/."""
