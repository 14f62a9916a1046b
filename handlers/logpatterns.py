"""Known error lines in GPU component logs, event messages and termination messages.

``classify_log(text)`` returns ``(code, line)`` for every code a line proves, the line
exactly as it appears in the log (trailing whitespace removed). The knowledge itself is
data: ``handlers/knowledge/logs.yaml`` (plus the user's ``log_patterns_file``), read by
``handlers.knowledge.logs``. One line can prove several codes, nested cause first: a kubelet
admission error that carries an NVML error gives NVML_INIT_FAILED, then
DEVICE_ADMISSION_FAILED.
"""

from __future__ import annotations

import functools
import re

from handlers.knowledge.logs import Catalogue, active, builtin

# Prefixes that make the same message look different on every line: CRI log format,
# klog header, Go log timestamp, logrus time=.
_PREFIXES = re.compile(
    r"^(?:\S+ (?:stdout|stderr) [FP] )?"
    r"(?:[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] )?"
    r"(?:\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)? )?"
    r"(?:time=\"[^\"]*\" )?"
)
_MAX_LINE = 1000

# Every code a built-in entry can prove (kept for callers of the former pattern list).
CODES_IN_LOGS = builtin().codes


def codes_of_line(line: str) -> tuple[str, ...]:
    """Every finding code one log line proves, nested cause first."""
    return active().codes_of(line)


def classify_line(line: str) -> str | None:
    """The first (deepest) finding code one log line proves, or None."""
    codes = active().codes_of(line)
    return codes[0] if codes else None


def _message(line: str) -> str:
    return _PREFIXES.sub("", line, count=1)


def classify_log(text: str | None) -> list[tuple[str, str]]:
    """``(code, line)`` for each code each line of ``text`` proves, in log order.

    A message repeated with different timestamps (a crash loop prints the same lines on
    every start) is returned once, as its first occurrence.
    """
    cat = active()
    if not text or not cat.might_match(text):
        return []
    if len(text) > _REMEMBER_MAX:
        return list(_classify(cat, text))
    return list(_classify_remembered(cat, text))


def _classify(cat: Catalogue, text: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or not cat.might_match(line):
            continue
        for code in cat.codes_of(line):
            key = (code, _message(line))
            if key in seen:
                continue
            seen.add(key)
            out.append((code, line[:_MAX_LINE]))
    return tuple(out)


# A crash-looping plugin's log (kept by LiveView per restart) and a DaemonSet's event
# messages come back diagnosis after diagnosis: classified once per catalogue.
_REMEMBER_MAX = 256 * 1024  # characters; a bigger text is classified every time
_classify_remembered = functools.lru_cache(maxsize=64)(_classify)


def last_lines(text: str | None, n: int = 5) -> list[str]:
    """The last ``n`` non-empty lines of a log, for evidence when no known line matched."""
    if not text:
        return []
    lines = [ln.rstrip() for ln in text.splitlines()[-(n * 4):] if ln.strip()]
    return [ln[:_MAX_LINE] for ln in lines[-n:]]
