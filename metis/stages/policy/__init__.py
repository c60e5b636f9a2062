"""Stages that check or shape the canonical request and events."""
