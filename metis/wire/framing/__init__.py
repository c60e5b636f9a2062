"""Byte framings of streamed bodies: SSE, SSE data lines, AWS event streams."""
