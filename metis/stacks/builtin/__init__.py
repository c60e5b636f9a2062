"""The built-in stack files, one YAML file per provider (docs/stacks.md)."""
