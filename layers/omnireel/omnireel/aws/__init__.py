"""Thin AWS clients. Tests replace AWS with moto; the local stack points them at its endpoint."""
