"""GET /health/live, /health/ready and /metrics."""
