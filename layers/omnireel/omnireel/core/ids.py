"""Ids of jobs (and of the batches made of them): random, or stable for a natural key, so that the same submission
retried makes the same id."""

from __future__ import annotations

import uuid

# Job ids are UUIDs: <= 64 chars (SageMaker InferenceId) and valid Step Functions execution names.
_NAMESPACE = uuid.UUID("3f7c9d52-8a0e-4a55-9c3e-2f8f0f7d6a11")


def new_job_id() -> str:
    return str(uuid.uuid4())


def job_id_for(natural_key: str) -> str:
    """A stable job id for a natural key (Idempotency-Key + caller, or an S3 object version)."""
    return str(uuid.uuid5(_NAMESPACE, natural_key))
