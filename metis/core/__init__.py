"""Layer 0: no IO, no metis imports but errors (ids, secrets, config files)."""
