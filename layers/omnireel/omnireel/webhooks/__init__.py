"""Webhooks: where a delivery may go, which secret signs it, and each attempt to deliver it."""
