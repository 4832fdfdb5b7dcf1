"""What only tests and benchmarks use: the scenario oracle (a launch answered in-process), the
tuning oracle, the performance simulator, composed faults and the scenario server driver.
Nothing in the product imports this package."""
