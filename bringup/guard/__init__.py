"""Guards every stage uses: bounded reads, size limits, text made safe to show, secrets kept out
of every file, one writer per run."""
