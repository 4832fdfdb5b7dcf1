"""Tests of bringup/observe/."""
