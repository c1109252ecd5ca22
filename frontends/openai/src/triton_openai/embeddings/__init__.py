"""POST /v1/embeddings."""
