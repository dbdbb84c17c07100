"""Events for consumers: their types, the job events, progress events and the batch.completed event."""
