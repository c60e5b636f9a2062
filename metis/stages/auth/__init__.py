"""Stages that authenticate and address a request."""
