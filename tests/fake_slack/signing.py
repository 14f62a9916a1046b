"""Signing requests as Slack does (v0 HMAC-SHA256 of ``v0:timestamp:body``)."""

from __future__ import annotations

import time

from slack_sdk.signature import SignatureVerifier


def signed_headers(secret: str, body: str, timestamp: int | None = None,
                   content_type: str = "application/x-www-form-urlencoded") -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": str(signature),
            "Content-Type": content_type}
