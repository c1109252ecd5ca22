"""End-to-end suite of the OpenAI-compatible frontend on the real stack."""
