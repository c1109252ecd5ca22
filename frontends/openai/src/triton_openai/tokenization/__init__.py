"""POST /tokenize and /detokenize, in vLLM's shapes."""
