"""Reading what a launch did: tracebacks, root-cause lines, signatures, the effective config,
the engine's own remedies, and the outcome record of one trial."""
