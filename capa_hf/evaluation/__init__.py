"""Evaluation: history conditions, the run loop, metrics and reports."""
