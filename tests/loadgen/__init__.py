"""Tests of bringup/loadgen/."""
