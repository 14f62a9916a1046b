"""``metav1.Status`` bodies and the errors that carry them, worded as the apiserver words them."""

from __future__ import annotations

from typing import Any

from .resources import ResourceType


class ApiError(Exception):
    """An API failure: becomes an HTTP response with a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        continue_token: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.continue_token = continue_token

    def status(self) -> dict[str, Any]:
        return failure(self.code, self.reason, self.message, self.details,
                       continue_token=self.continue_token)


def failure(
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    continue_token: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"continue": continue_token} if continue_token else {}
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": meta,
                           "status": "Failure", "message": message, "reason": reason}
    if details:
        out["details"] = details
    out["code"] = code
    return out


def success(rt: ResourceType, name: str, uid: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def _details(rt: ResourceType, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if rt.group:
        out["group"] = rt.group
    out["kind"] = rt.plural
    return out


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found', _details(rt, name))


def namespace_not_found(name: str) -> ApiError:
    return ApiError(404, "NotFound", f'namespaces "{name}" not found',
                    {"name": name, "kind": "namespaces"})


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists',
                    _details(rt, name))


def conflict(rt: ResourceType, name: str, why: str | None = None) -> ApiError:
    why = why or ("the object has been modified; please apply your changes to the latest "
                  "version and try again")
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {rt.qualified} '
                    f'"{name}": {why}', _details(rt, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are (field, reason type, message)."""
    text = "; ".join(f"{f}: {m}" for f, _, m in causes)
    details = _details(rt, name)
    details["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: {text}', details)


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource")


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f'the body of the request was in an unknown format - accepted media types '
                    f'include: {", ".join(accepted)}', {"causes": [
                        {"reason": "UnsupportedMediaType", "message": content_type}]})


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, rt: ResourceType, sub: str | None, name: str | None,
              namespace: str | None) -> ApiError:
    resource = f"{rt.plural}/{sub}" if sub else rt.plural
    subject = f'{rt.qualified} "{name}"' if name else rt.qualified
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    msg = (f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
           f'in API group "{rt.group}" {scope}')
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    return ApiError(403, "Forbidden", msg, details)


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                    {"retryAfterSeconds": retry_after},
                    headers={"Retry-After": str(retry_after)})


def internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError",
                    f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def expired(message: str, continue_token: str | None = None) -> ApiError:
    return ApiError(410, "Expired", message, continue_token=continue_token)
