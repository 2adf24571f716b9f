"""Batch pipelines: the warehouse loader and its validation."""
