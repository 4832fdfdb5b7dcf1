"""Tests of bringup/knowledge/."""
