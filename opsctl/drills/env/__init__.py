"""Where a drill runs: the embedded environment (simulated time) or the live one (wall clock)."""
