"""Tests of bringup/dryrun/."""
