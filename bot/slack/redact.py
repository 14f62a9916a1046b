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
        return True


def install(secrets: Iterable[str], loggers: Iterable[logging.Logger] | None = None) -> None:
    """Add the filter to every handler of the root logger (and of ``loggers``)."""
    f = RedactingFilter(secrets)
    for logger in [logging.getLogger(), *(loggers or [])]:
        for h in logger.handlers:
            if not any(isinstance(x, RedactingFilter) for x in h.filters):
                h.addFilter(f)
