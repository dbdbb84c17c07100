"""Shared by three or more capabilities: typed errors, bounded text, record structs, the caller scope, the clock, job
ids, S3 URIs and object versions, and SQS message text (models and rules)."""
