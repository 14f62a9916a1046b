"""Failed reads from a live API server, as messages an on-call human can act on.

    ViewError (handlers.view)
     ├── KubeconfigError         kubeconfig missing or broken, unknown context
     └── LiveError               a request failed; .server, .status, .op say which
          ├── ApiUnreachable     connection refused, name not resolved, TLS, timeout
          ├── ApiUnauthorized    401: the credentials were rejected
          ├── ApiForbidden       403: RBAC denies the verb; .rule is the rule that allows it
          ├── ApiThrottled       429 still after the bounded retries
          ├── ApiServerError     5xx or a dropped connection, still after the retries
          └── ApiBadResponse     any other status, a body that is not JSON, lies about its
                                 encoding or length, is too large; endless pagination

Third-party exceptions are wrapped where the request is made (``transport.py``) and chained
as ``__cause__``. Messages name the server URL (credentials in it are removed) and never
carry a token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from handlers.view import ViewError


@dataclass(frozen=True)
class Op:
    """What a request was for, to say in an error message what could not be done."""

    verb: str  # list | get | watch
    kind: str
    group: str
    resource: str  # plural, or plural/subresource ("pods/log")
    namespace: str | None  # None: all namespaces, or a cluster-scoped kind
    namespaced: bool
    name: str | None = None

    @property
    def what(self) -> str:
        """``pods in namespace "ml-team"``, ``nodes``, ``pods/log "train-0" in ...``."""
        text = self.resource + (f' "{self.name}"' if self.name else "")
        if not self.namespaced:
            return text
        if self.namespace:
            return f'{text} in namespace "{self.namespace}"'
        return f"{text} in all namespaces"


class KubeconfigError(ViewError):
    """No usable cluster configuration: nothing was sent to any server."""


class LiveError(ViewError):
    """A request to the API server failed."""

    def __init__(
        self, message: str, *, server: str, op: Op | None = None, status: int | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message, kind=op.kind if op else "",
                         namespace=op.namespace if op else None)
        self.server = server
        self.op = op
        self.status = status
        self.attempts = attempts

    @property
    def verb(self) -> str | None:
        return self.op.verb if self.op else None

    @property
    def resource(self) -> str | None:
        return self.op.resource if self.op else None


class ApiUnreachable(LiveError):
    """No HTTP answer at all. ``.why``: ``connection refused``, ``timed out after 10s``, ..."""

    fatal = True

    def __init__(self, why: str, *, server: str, op: Op | None = None) -> None:
        super().__init__(f"cannot reach the Kubernetes API at {server}: {why}",
                         server=server, op=op)
        self.why = why


class ApiUnauthorized(LiveError):
    fatal = True


class ApiForbidden(LiveError):
    def __init__(
        self, message: str, *, server: str, op: Op, user: str | None, rule: dict[str, list[str]]
    ) -> None:
        super().__init__(message, server=server, op=op, status=403)
        self.user = user
        self.rule = rule


class ApiThrottled(LiveError):
    pass


class ApiServerError(LiveError):
    pass


class ApiBadResponse(LiveError):
    pass


def redact_url(url: str) -> str:
    """The server URL without any ``user:password@`` part, and without a trailing slash."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


_USER_RE = re.compile(r'User "([^"]*)"')


def status_message(body: bytes) -> str:
    """The ``message`` of a metav1.Status body, or a short excerpt of a non-JSON body."""
    try:
        doc: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body[:200].decode("utf-8", "replace").strip()
        return " ".join(text.split())
    if isinstance(doc, dict) and isinstance(doc.get("message"), str):
        return str(doc["message"])
    return ""


def unauthorized(server: str, op: Op | None) -> ApiUnauthorized:
    return ApiUnauthorized(
        f"the API at {server} rejected our credentials (401): check the token/kubeconfig user",
        server=server, op=op, status=401,
    )


def forbidden(server: str, op: Op, body: bytes) -> ApiForbidden:
    """'forbidden: cannot list pods in namespace "ml-team" (403) ... Grant: rules: [...]'."""
    found = _USER_RE.search(status_message(body))
    user = found.group(1) if found else None
    rule = {"apiGroups": [op.group], "resources": [op.resource], "verbs": [op.verb]}
    rule_text = (f'rules: [{{apiGroups: ["{op.group}"], resources: ["{op.resource}"], '
                 f'verbs: ["{op.verb}"]}}]')
    if op.namespaced and op.namespace:
        scope = f"in a Role in {op.namespace} (or a ClusterRole for all namespaces)"
    else:
        scope = "in a ClusterRole bound with a ClusterRoleBinding"
    as_user = f' for User "{user}"' if user else ""
    message = f"forbidden: cannot {op.verb} {op.what} (403){as_user}. Grant: {rule_text} {scope}"
    return ApiForbidden(message, server=server, op=op, user=user, rule=rule)


def throttled(server: str, op: Op | None, attempts: int) -> ApiThrottled:
    what = f" ({op.verb} {op.what})" if op else ""
    return ApiThrottled(
        f"the API at {server} is rate-limiting us (429 Too Many Requests){what}, still after "
        f"{attempts} attempts", server=server, op=op, status=429, attempts=attempts,
    )


def server_error(
    server: str, op: Op | None, status: int, reason: str, body: bytes, attempts: int
) -> ApiServerError:
    detail = status_message(body)
    what = f" to {op.verb} {op.what}" if op else ""
    return ApiServerError(
        f"the API at {server} failed{what}: {status} {reason}".rstrip()
        + (f": {detail}" if detail else "") + f" (after {attempts} attempts)",
        server=server, op=op, status=status, attempts=attempts,
    )


def dropped(server: str, op: Op | None, attempts: int) -> ApiServerError:
    what = f" during {op.verb} {op.what}" if op else ""
    return ApiServerError(
        f"the API at {server} dropped the connection{what} (after {attempts} attempts)",
        server=server, op=op, attempts=attempts,
    )


def bad_status(server: str, op: Op | None, status: int, reason: str, body: bytes) -> ApiBadResponse:
    detail = status_message(body)
    what = f" to {op.verb} {op.what}" if op else ""
    return ApiBadResponse(
        f"the API at {server} refused{what}: {status} {reason}".rstrip()
        + (f": {detail}" if detail else ""), server=server, op=op, status=status,
    )


def bad_answer(server: str, op: Op | None, why: str) -> ApiBadResponse:
    """An answer that cannot be used: a body that lies about its encoding or length, one
    too large, a list whose pages never end."""
    what = f" for {op.verb} {op.what}" if op else ""
    return ApiBadResponse(f"the API at {server} answered{what} with {why}",
                          server=server, op=op)


def throttled_for(server: str, op: Op | None, seconds: float) -> ApiThrottled:
    what = f" ({op.verb} {op.what})" if op else ""
    return ApiThrottled(
        f"the API at {server} is rate-limiting us (429 Too Many Requests){what} and asks to "
        f"wait {seconds:.0f}s, longer than gpubot waits", server=server, op=op, status=429)


def not_json(server: str, op: Op | None, body: bytes) -> ApiBadResponse:
    excerpt = " ".join(body[:120].decode("utf-8", "replace").split())
    what = f" for {op.verb} {op.what}" if op else ""
    return ApiBadResponse(
        f"the API at {server} answered{what} with something that is not Kubernetes JSON: "
        f"{excerpt!r}", server=server, op=op, status=200,
    )
