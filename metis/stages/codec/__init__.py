"""Stages that encode the request and decode and normalize the reply."""
