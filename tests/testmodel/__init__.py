"""Tests of bringup/testmodel/."""
