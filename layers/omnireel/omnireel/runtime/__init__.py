"""What every Lambda function's runtime shares: typed settings, observability, tracing and the step error mapping."""
