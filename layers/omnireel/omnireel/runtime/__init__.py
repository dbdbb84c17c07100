"""What every Lambda function's runtime shares: typed settings, observability and the handler decorators."""
