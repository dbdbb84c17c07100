"""Events for consumers: the job events, progress events and the batch.completed event."""
