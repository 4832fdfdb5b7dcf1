"""One trial and where it runs: launch, process group, watchdog, executors (local, Ray), GPU
slots and ports, kernel-compile watching."""
