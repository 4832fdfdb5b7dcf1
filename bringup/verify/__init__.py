"""Is the answer right: the probe ladder, probes that use the server as users do, the HTTP side
of probes, the reference (greedy tokens and logprobs) and the sampling arithmetic."""
