"""Tests of bringup/record/."""
