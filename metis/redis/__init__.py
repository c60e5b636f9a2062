"""The metis[redis] boundary: Redis-backed stores and their errors."""
