"""Stages that control a call: retries and telemetry."""
