"""Built-in stages, one module per concern."""
