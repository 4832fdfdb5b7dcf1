"""Tests of bringup/oracle/."""
