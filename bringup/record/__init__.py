"""The record of every launch: the journal (SQLite) and a run's results."""
