"""Layer 4: stack files, their loading and ``extends``; the built-in stacks."""
