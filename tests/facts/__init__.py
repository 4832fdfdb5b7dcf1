"""Tests of bringup/facts/."""
