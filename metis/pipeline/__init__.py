"""Pipeline engine: the Stage interface, Pipeline, stack loading and validation."""
