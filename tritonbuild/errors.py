"""Errors that build.py reports to its user, as one small hierarchy.

    TritonBuildError                 anything build.py reports and exits on
    ├── ValidationError              a flag value or combination is not allowed (exit 2)
    │   ├── UnknownValueError        a value outside the allowed set
    │   ├── MalformedValueError      a value of the wrong shape (e.g. YY.MM)
    │   ├── ConflictError            two flags that cannot go together
    │   ├── UnsupportedError         the chosen image flavor cannot honor the flag
    │   └── UsageError               the command line itself (unknown flag, missing value)
    ├── SourceError                  a file the image needs is missing from the checkout
    └── EngineError                  the container engine
        ├── EngineUnavailableError   no engine answers
        └── BuildFailedError         the build ran and failed (its exit code is passed on)

Every message is one line a user can act on.
"""
from __future__ import annotations

__all__ = [
    "TritonBuildError",
    "ValidationError",
    "UnknownValueError",
    "MalformedValueError",
    "ConflictError",
    "UnsupportedError",
    "UsageError",
    "SourceError",
    "EngineError",
    "EngineUnavailableError",
    "BuildFailedError",
]


class TritonBuildError(Exception):
    """Base class; ``exit_code`` is what build.py exits with."""

    exit_code = 1


class ValidationError(TritonBuildError):
    """A flag's value is not allowed; names the flag, the value and what is allowed."""

    exit_code = 2

    def __init__(self, flag: str, value: object, allowed: str) -> None:
        self.flag, self.value, self.allowed = flag, value, allowed
        super().__init__(f"{flag}={_one_line(value)}: {allowed}")


def _one_line(value: object) -> str:
    """The value as typed, its control characters escaped: the message stays one line."""
    text = str(value)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


class UnknownValueError(ValidationError):
    pass


class MalformedValueError(ValidationError):
    pass


class ConflictError(ValidationError):
    pass


class UnsupportedError(ValidationError):
    pass


class UsageError(ValidationError):
    def __init__(self, message: str) -> None:
        self.flag, self.value, self.allowed = "", "", message
        Exception.__init__(self, f"{message} (see ./build.py --help)")


class SourceError(TritonBuildError):
    exit_code = 2


class EngineError(TritonBuildError):
    pass


class EngineUnavailableError(EngineError):
    pass


class BuildFailedError(EngineError):
    def __init__(self, exit_code: int, command: str) -> None:
        self.exit_code = exit_code
        super().__init__(f"the image build failed with exit code {exit_code}: {command}")
