"""Stages that edit the encoded request for a provider."""
