"""Layer 2, sans-IO: the wire protocols (codecs per dialect, framing, reading)."""
