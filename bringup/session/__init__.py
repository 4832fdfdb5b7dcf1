"""A bring-up session: the loop (run), who it is about (identity), the memory plan checked
launch by launch, and bring-ups across a Ray cluster's node types."""
