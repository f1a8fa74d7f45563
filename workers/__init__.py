"""Worker runtime: backend detection, node identity, startup benchmark, heartbeat and the claim loop."""
