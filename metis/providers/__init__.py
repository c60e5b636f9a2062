"""Provider stacks (YAML) and the codecs they need."""
