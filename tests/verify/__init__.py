"""Tests of bringup/verify/."""
