"""HTTP plumbing every route shares: errors in OpenAI's shape (`errors.py`), request ids
(`request_ids.py`), server-sent events (`sse.py`), the two kinds of successful answer
(`answers.py`), a route's cancellation when its client leaves (`disconnect.py`), the
middlewares in front of the app (`access.py`, `guards.py`) and the request models' base
(`protocol.py`).  It knows no API and no model, so every other layer may use it."""
