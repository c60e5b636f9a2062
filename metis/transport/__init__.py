"""Layer 4: the only IO, sending requests and reading replies."""
