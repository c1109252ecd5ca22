"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.

    OpenAIError                      (500, server_error)
    ├── BadRequestError              (400, invalid_request_error; names the parameter)
    ├── AuthenticationError          (401, invalid_request_error, code invalid_api_key)
    ├── ModelNotFoundError           (404, invalid_request_error, code model_not_found)
    ├── NotFoundError                (404, invalid_request_error; e.g. a stored response)
    ├── RequestTooLargeError         (413, invalid_request_error)
    ├── TooManyRequestsError         (429, rate_limit_error; try again later)
    └── ServiceUnavailableError      (503, service_unavailable)
    ClientGone                       (499, nobody reads it: the client closed the connection)

Every response the frontend sends for a failure goes through `error_response` (or, from
a middleware in front of the app, `send_error`), including FastAPI's own validation
errors and unknown routes; any other exception becomes `internal_error`'s 500 in the
access middleware, where the request's ids are still known (Starlette would hand it to a
handler outside every middleware).  Every layer above the HTTP plumbing refuses requests
with these, which is why they sit at its bottom.
"""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..triton.client import TritonError
from . import request_ids

log = logging.getLogger("triton_openai")

# The `code` of a 500 from a failure of the frontend itself (internal_error).
INTERNAL_ERROR = "internal_error"


class OpenAIError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type,
                          "param": self.param, "code": self.code}}


class BadRequestError(OpenAIError):
    status = 400
    type = "invalid_request_error"


class AuthenticationError(OpenAIError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class ModelNotFoundError(OpenAIError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class NotFoundError(OpenAIError):
    status = 404
    type = "invalid_request_error"


class RequestTooLargeError(OpenAIError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class TooManyRequestsError(OpenAIError):
    """The request is fine, the server is at a limit of its own: 429 with Retry-After,
    which OpenAI's clients retry with backoff by themselves (a 400 they would not)."""
    status = 429
    type = "rate_limit_error"


class ServiceUnavailableError(OpenAIError):
    status = 503
    type = "service_unavailable"


# Seconds a client is asked to wait before it tries a 503 again (the server may be
# restarting, or draining while another replica takes over), or a 429.
RETRY_AFTER_S = 5


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


def from_triton(err: TritonError) -> OpenAIError:
    if err.status == 400:
        return BadRequestError(err.message)
    if err.status == 503:
        return ServiceUnavailableError(err.message)
    return OpenAIError(err.message)


def internal_error(err: BaseException) -> OpenAIError:
    """A failure of the frontend's own code, as a 500 that tells the client what kind of
    failure it was and where to look, never what the exception says: its text can hold
    paths, settings or another request's data.  The details go to the server's log,
    under the request's ids."""
    log.error("request %s (client id %s): unexpected %s", request_ids.current(),
              request_ids.given() or "-", type(err).__name__,
              exc_info=(type(err), err, err.__traceback__))
    return OpenAIError(f"The server had an error while processing the request; its log "
                       f"names it as request {request_ids.current()}.", code=INTERNAL_ERROR)


def as_openai_error(err: Exception) -> OpenAIError:
    """Any failure in OpenAI's terms: Triton's errors by their status, others as a 500
    that says nothing of their own (internal_error)."""
    if isinstance(err, OpenAIError):
        return err
    if isinstance(err, TritonError):
        return from_triton(err)
    return internal_error(err)


def error_response(err: OpenAIError) -> JSONResponse:
    headers = ({"WWW-Authenticate": "Bearer"} if err.status == 401
               else {"Retry-After": str(RETRY_AFTER_S)} if err.status in (429, 503) else None)
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


async def send_error(send, err: OpenAIError) -> None:
    """`err` answered by an ASGI middleware, before the app (and its handlers) saw the
    request."""
    body = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if err.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _param_from_loc(loc) -> str | None:
    # ("body", "messages", 0, "role") -> "messages[0].role"
    parts = [p for p in loc if p != "body"]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or None


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(OpenAIError)
    async def _openai_error(_: Request, exc: OpenAIError):
        return error_response(exc)

    @app.exception_handler(TritonError)
    async def _triton_error(_: Request, exc: TritonError):
        return error_response(from_triton(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError):
        errors = exc.errors()
        first = errors[0] if errors else {}
        param = _param_from_loc(first.get("loc", ()))
        msg = first.get("msg", "invalid request")
        if first.get("type") == "json_invalid":
            return error_response(BadRequestError(f"request body is not valid JSON: {msg}"))
        return error_response(BadRequestError(f"{param}: {msg}" if param else msg, param=param))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException):
        err = OpenAIError(str(exc.detail))
        err.status = exc.status_code
        err.type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return error_response(err)

    @app.exception_handler(ClientGone)
    async def _client_gone(_: Request, exc: ClientGone):
        # Nobody reads this; 499 (nginx's "client closed request") marks it in access logs.
        return JSONResponse({}, status_code=499)
