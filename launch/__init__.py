"""Launch scripts: sweeps of the experiments' entry points (local executor)."""
