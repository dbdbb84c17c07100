"""Shared by every capability: typed errors, bounded text, record structs and the caller scope (models and rules)."""
