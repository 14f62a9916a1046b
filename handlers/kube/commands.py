"""kubectl command lines a fix hands out, built so that any name or payload is quoted the way
a POSIX shell reads it back (``shlex``): what on-call copies runs as printed."""

from __future__ import annotations

import json
import shlex
from typing import Any

DRAIN_FLAGS = ("--ignore-daemonsets", "--delete-emptydir-data")
# The image ``kubectl debug node/...`` runs; the node's root is mounted at /host.
DEBUG_IMAGE = "ubuntu"


def line(*argv: str, note: str = "") -> str:
    """One command line from its words; ``note`` is a trailing comment saying what for."""
    text = shlex.join(argv)
    return f"{text}   # {note}" if note else text


def kubectl(*argv: str, namespace: str | None = None, note: str = "") -> str:
    ns = ("-n", namespace) if namespace else ()
    return line("kubectl", *ns, *argv, note=note)


def payload(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def merge_patch(resource: str, name: str, value: dict[str, Any], *,
                namespace: str | None = None, note: str = "") -> str:
    """``kubectl patch RESOURCE NAME --type merge -p JSON``: maps merge, lists are replaced."""
    return kubectl("patch", resource, name, "--type", "merge", "-p", payload(value),
                   namespace=namespace, note=note)


def json_patch_add(resource: str, name: str, path: str, items: list[Any], *, exists: bool,
                   namespace: str | None = None, note: str = "") -> str:
    """Adds ``items`` to the list at ``path`` (``/spec/...``) with a JSON patch: appended when
    the list exists, else the list is created with them (an add to ``/-`` of a missing list
    fails)."""
    ops = ([{"op": "add", "path": f"{path}/-", "value": i} for i in items] if exists else
           [{"op": "add", "path": path, "value": list(items)}])
    return kubectl("patch", resource, name, "--type", "json", "-p", payload(ops),
                   namespace=namespace, note=note)


def pointer(path: str) -> str:
    """A dotted path with ``[i]`` items (``spec.a[0].b``) as a JSON pointer (``/spec/a/0/b``);
    the keys are Kubernetes field names (no "/" or "~" to escape)."""
    return "/" + path.replace("[", ".").replace("]", "").replace(".", "/") if path else ""


def node_shell(node: str, script: str, note: str = "") -> str:
    """Runs ``script`` on the node's host from a debug pod (``chroot /host``)."""
    return kubectl("debug", f"node/{node}", "-it", f"--image={DEBUG_IMAGE}", "--", "chroot",
                   "/host", "sh", "-c", script, note=note)


def drain(node: str) -> str:
    return kubectl("drain", node, *DRAIN_FLAGS)


def pods_on_node(node: str) -> str:
    """A field selector for the pods bound to ``node``."""
    return f"spec.nodeName={node}"
