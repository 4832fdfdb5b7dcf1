"""Composed faults: a benchmark of the search that nobody can tune to (docs/composed-faults.md).

Fault atoms (`bringup/data/faults/*.yaml`, each from a real log or a public report) are drawn at
random onto base scenarios (hardware, model, engine, no fault), and every draw is proven solvable
with the scenario oracle before the real search loop runs on it in-process.
"""
