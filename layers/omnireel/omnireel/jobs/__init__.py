"""Jobs: the request, the job record and its lifecycle, and the use cases from submission to the terminal event."""
