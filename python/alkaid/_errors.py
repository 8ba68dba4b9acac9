"""Alkaid's exceptions: one per kind of failure a caller branches on.

Every exception raised for a failed Alkaid operation is an :class:`Error`;
its message is the library's Status message, which says what was wrong and
where, and ``code`` is the Status code's name ("Invalid", "IOError", ...).
The subclasses also derive from the matching built-in exception, so
``except TimeoutError`` or ``except ValueError`` work too.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "NotFoundError",
    "TimedOutError",
    "InvalidError",
    "PermissionDeniedError",
    "IOFailedError",
]


class Error(Exception):
    """A failed Alkaid operation. ``code`` names the Status code."""

    def __init__(self, message: str, code: str = "Unknown") -> None:
        super().__init__(message)
        self.code = code


class NotFoundError(Error, LookupError):
    """A topic, column or other name that does not exist (Status KeyError)."""


class TimedOutError(Error, TimeoutError):
    """A wait ended before what it waited for happened (Status TimedOut)."""


class InvalidError(Error, ValueError):
    """Malformed input or an invalid argument or state: a schema mismatch, a
    closed consumer or producer, bad options (Status Invalid, TypeError,
    IndexError, CapacityError)."""


class PermissionDeniedError(Error, PermissionError):
    """The broker refused the caller (Status PermissionDenied)."""


class IOFailedError(Error, OSError):
    """A system call failed, or no broker answers on the socket (Status IOError)."""

    def __init__(self, message: str, code: str = "IOError") -> None:
        Error.__init__(self, message, code)
