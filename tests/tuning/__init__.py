"""Tests of bringup/tuning/."""
