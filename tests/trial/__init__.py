"""Tests of bringup/trial/."""
