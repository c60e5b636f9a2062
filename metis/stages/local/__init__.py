"""Stages for locally run servers."""
