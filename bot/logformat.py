"""``GPUBOT_LOG_FORMAT=json``: one JSON object per log line, for log collectors (Loki,
Cloud Logging, Elasticsearch), with a traceback kept inside its record."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# LogRecord's own attributes; anything else on a record came from ``extra=`` and is kept.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        return json.dumps(out, default=str, ensure_ascii=False)
