"""Facts about the machine and the model, found before any launch: GPUs, driver, links, installed
packages, the model fingerprint, the memory plan and the preflight checks."""
