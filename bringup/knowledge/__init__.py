"""Knowledge as validated data: rules (verdicts about levels before any launch) and the
conditions they and the scenarios are written in."""
