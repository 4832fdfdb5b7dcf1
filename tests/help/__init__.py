"""Tests of bringup/help/."""
