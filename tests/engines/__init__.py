"""Tests of bringup/engines/."""
