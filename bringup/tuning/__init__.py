"""Tuning: the fastest working configuration, under latency targets."""
