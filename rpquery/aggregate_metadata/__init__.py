"""Aggregate metadata and the flavor extra-specs filter."""
