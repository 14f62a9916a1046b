"""What ``gpubot snapshot`` says about the snapshot it wrote (``gpubot-snapshot.yaml``): when
it was taken, which namespaces, whether it was anonymized, and what it could not capture.

The loader recognises the document by its kind, as it does every other file. A kind listed
under ``notCaptured`` reads as "not checked" (a ``ViewError``), never as "none": a snapshot
taken by someone RBAC kept from ResourceQuotas does not say the cluster has no quota.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

KIND = "GpubotSnapshot"
API_VERSION = "gpubot.io/v1"
FILE_NAME = "gpubot-snapshot.yaml"
LOGS = "pods/log"  # the "kind" of a refusal to read container logs


@dataclass(frozen=True)
class Refusal:
    """A kind (or ``pods/log``) the snapshot lacks: everywhere (``namespace`` None), in one
    namespace, or (``outside``) in every namespace but the snapshot's own."""

    kind: str
    reason: str
    namespace: str | None = None
    outside: bool = False

    def covers(self, namespace: str | None, scope: tuple[str, ...] | None) -> bool:
        """Whether a read in ``namespace`` (None: every namespace) hits what is missing."""
        if self.outside:
            return namespace is None or scope is None or namespace not in scope
        return self.namespace is None or namespace is None or namespace == self.namespace

    def where(self) -> str:
        if self.outside:
            return " outside the snapshot's namespaces"
        return f' in namespace "{self.namespace}"' if self.namespace else ""

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind}
        if self.namespace:
            doc["namespace"] = self.namespace
        if self.outside:
            doc["outside"] = True
        doc["reason"] = self.reason
        return doc


@dataclass
class Manifest:
    captured_at: datetime | None = None
    namespaces: tuple[str, ...] | None = None  # None: every namespace
    anonymized: bool = False
    not_captured: list[Refusal] = field(default_factory=list)
    objects: dict[str, int] = field(default_factory=dict)  # kind -> how many
    logs: int = 0  # container logs written
    version: str = ""
    source: str | None = None  # left out when anonymized: it names the server

    def refusal(self, kind: str, namespace: str | None) -> Refusal | None:
        return next((r for r in self.not_captured
                     if r.kind == kind and r.covers(namespace, self.namespaces)), None)

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "apiVersion": API_VERSION, "kind": KIND,
            "capturedAt": _stamp(self.captured_at) if self.captured_at else None,
            "gpubotVersion": self.version,
            "namespaces": list(self.namespaces) if self.namespaces is not None else "all",
            "anonymized": self.anonymized,
        }
        if self.source:
            doc["source"] = self.source
        doc["objects"] = dict(sorted(self.objects.items()))
        doc["logs"] = self.logs
        doc["notCaptured"] = [r.to_doc() for r in self.not_captured]
        return doc

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Manifest:
        """Raises ValueError naming the field that is wrong."""
        at = doc.get("capturedAt")
        captured = None
        if at is not None:
            try:
                captured = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"capturedAt: not a timestamp: {at!r}") from None
            if captured.tzinfo is None:
                captured = captured.replace(tzinfo=UTC)
        ns = doc.get("namespaces", "all")
        if ns != "all" and not (isinstance(ns, list) and all(isinstance(n, str) for n in ns)):
            raise ValueError("namespaces: \"all\" or a list of names")
        refusals = []
        for i, r in enumerate(doc.get("notCaptured") or []):
            if not isinstance(r, dict) or not isinstance(r.get("kind"), str):
                raise ValueError(f"notCaptured[{i}]: a mapping with a kind")
            namespace = r.get("namespace")
            refusals.append(Refusal(r["kind"], str(r.get("reason") or "not captured"),
                                    str(namespace) if namespace else None,
                                    bool(r.get("outside"))))
        objects = doc.get("objects") or {}
        return cls(captured_at=captured,
                   namespaces=None if ns == "all" else tuple(ns),
                   anonymized=bool(doc.get("anonymized")), not_captured=refusals,
                   objects={str(k): int(v) for k, v in objects.items()
                            if isinstance(v, int)} if isinstance(objects, dict) else {},
                   logs=int(doc.get("logs") or 0), version=str(doc.get("gpubotVersion") or ""),
                   source=str(doc["source"]) if doc.get("source") else None)


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
