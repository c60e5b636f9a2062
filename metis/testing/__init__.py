"""Tools for testing code that uses metis: cassettes and replay transports."""
