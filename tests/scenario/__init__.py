"""Tests of bringup/scenario/."""
