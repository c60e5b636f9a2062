"""The built-in embedding stacks, one YAML file per provider (docs/embeddings.md)."""
