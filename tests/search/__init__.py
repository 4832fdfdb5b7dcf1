"""Tests of bringup/search/."""
