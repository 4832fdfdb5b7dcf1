"""Tests of bringup/report/."""
