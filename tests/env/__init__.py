"""Tests of bringup/env/."""
