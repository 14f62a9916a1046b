"""Keep secrets out of logs: a logging filter that masks tokens and configured secrets."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

_PATTERNS = re.compile(
    r"(xox[abeoprs]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+"
    r"|(?<=[\"']token[\"']: [\"'])[^\"']+|(?<=token=)[^&\s]+"
    r"|(?<=Bearer )[A-Za-z0-9._~+/=-]+)"
)
MASK = "[redacted]"
# LogRecord's own attributes; the others came from ``extra=`` (the operator log's fields).
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime"}


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, MASK)
    return _PATTERNS.sub(MASK, text)


class RedactingFilter(logging.Filter):
    """Attach to handlers: every record's final message is scrubbed."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message, self.secrets)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        for key, value in list(vars(record).items()):  # extra= fields: the JSON log's keys
            if key in _STANDARD:
                continue
            if isinstance(value, str):
                setattr(record, key, redact(value, self.secrets))
            elif isinstance(value, list | tuple):
                setattr(record, key, [redact(v, self.secrets) if isinstance(v, str) else v
                                      for v in value])
        return True


def install(secrets: Iterable[str], loggers: Iterable[logging.Logger] | None = None) -> None:
    """Add the filter to every handler of the root logger (and of ``loggers``)."""
    f = RedactingFilter(secrets)
    for logger in [logging.getLogger(), *(loggers or [])]:
        for h in logger.handlers:
            if not any(isinstance(x, RedactingFilter) for x in h.filters):
                h.addFilter(f)
