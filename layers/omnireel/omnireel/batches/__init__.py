"""Batches: many job requests in one submission, fanned out, counted and completed."""
