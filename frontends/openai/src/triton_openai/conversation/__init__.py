"""What chat completions, the Responses API, /tokenize and the warm-up share about a
conversation: its messages and tool definitions (`messages.py`), their rendering through
the chat template (`templating.py`), the request's tool use (`tools.py`), how generated
text is decoded into reasoning, content and tool calls (`decoding.py`), and the
preparation of a request before it generates (`preparation.py`).  No endpoint package
imports another; what they share sits here."""
