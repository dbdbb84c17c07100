"""The omnireel command line: local stack, submit, status, events, demo."""
