"""Checks that a fix's commands run as printed and its patches fit their kinds.

A command line is split as a POSIX shell splits it (``shlex``, pipelines and ``&&`` apart).
kubectl's subcommands and flags are read from ``kubectl <sub> --help`` (cached per
subcommand); helm is not on these machines, so its flags come from a table taken from its
source; the few other programs a fix runs are named in ``OTHER``. A ``kubectl patch`` payload
must parse and fit the schema of the kind it patches, as a ``Patch`` must: built-in kinds
from kubernetes-validate's strict OpenAPI schemas, the CRDs from their upstream definitions in
``tests/data/crds`` (each file names its source).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate

from handlers.model import Patch

CRD_DIR = Path(__file__).parent / "data" / "crds"
K8S_VERSION = "1.32.0"

# helm 4 (helm/helm at e9b85e4d): pkg/cmd/upgrade.go, repo_add.go, repo_update.go, the chart
# and values flags of pkg/cmd/flags.go, the global flags of pkg/cli/environment.go.
HELM_SOURCE = "https://github.com/helm/helm/tree/e9b85e4de16ad45805843fb121748018cf89094b/pkg"
_HELM_GLOBAL = {"namespace": "n", "kubeconfig": "", "kube-context": "", "debug": "",
                "repository-config": "", "repository-cache": "", "registry-config": ""}
_HELM_CHART = {"ca-file": "", "cert-file": "", "key-file": "", "keyring": "", "repo": "",
               "username": "", "password": "", "pass-credentials": "", "plain-http": "",
               "insecure-skip-tls-verify": "", "verify": "", "version": "", "values": "f",
               "set": "", "set-file": "", "set-json": "", "set-literal": "", "set-string": ""}
HELM: dict[tuple[str, ...], dict[str, str]] = {
    ("upgrade",): {**_HELM_GLOBAL, **_HELM_CHART, "install": "i", "create-namespace": "",
                   "reuse-values": "", "reset-values": "", "reset-then-reuse-values": "",
                   "atomic": "", "rollback-on-failure": "", "cleanup-on-fail": "",
                   "wait": "", "wait-for-jobs": "", "timeout": "", "dry-run": "",
                   "description": "", "devel": "", "force": "", "history-max": "",
                   "skip-crds": "", "output": "o"},
    ("repo", "add"): {**_HELM_GLOBAL, "force-update": "", "username": "", "password": "",
                      "pass-credentials": "", "ca-file": "", "cert-file": "", "key-file": "",
                      "insecure-skip-tls-verify": "", "timeout": ""},
    ("repo", "update"): {**_HELM_GLOBAL, "timeout": ""},
}
_HELM_BOOL = {"install", "create-namespace", "reuse-values", "reset-values", "atomic",
              "reset-then-reuse-values", "rollback-on-failure", "cleanup-on-fail",
              "wait-for-jobs", "devel", "force", "skip-crds", "debug", "force-update",
              "pass-credentials", "insecure-skip-tls-verify", "plain-http", "verify"}

# Other programs a fix may run, with the subcommands it may name. Pipelines may end in text
# filters. (OpenShift's oc: `oc adm policy add-scc-to-user NAME -z SA -n NS`.)
OTHER: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "oc": (("adm", "policy", "add-scc-to-user"), frozenset({"-z", "-n", "--namespace"})),
    "curl": ((), frozenset({"-s", "--silent", "-H", "-u"})),
}
FILTERS = {"grep", "tail", "head", "jq", "sort"}
_SEPARATORS = {"|", "||", "&&", ";"}
_PLACEHOLDER = re.compile(r"<[^<>]*>|\.\.\.")
# Resource names kubectl takes -> the kind (a schema to check a patch payload against).
RESOURCES = {"pod": "Pod", "deployment": "Deployment", "statefulset": "StatefulSet",
             "ds": "DaemonSet", "daemonset": "DaemonSet", "replicaset": "ReplicaSet",
             "job": "Job", "cronjob": "CronJob", "resourcequota": "ResourceQuota",
             "clusterpolicy": "ClusterPolicy", "clusterqueue": "ClusterQueue",
             "localqueue": "LocalQueue", "node": "Node", "namespace": "Namespace"}


@dataclass
class Help:
    subcommands: set[str] = field(default_factory=set)
    flags: dict[str, bool] = field(default_factory=dict)  # "--name" / "-n" -> takes a value


_FLAG = re.compile(r"^\s+(?:-(\w), )?--([\w-]+)=(.*):$")


def _parse_help(text: str) -> Help:
    h = Help()
    in_commands = False
    for line in text.splitlines():
        if line and not line.startswith(" "):
            in_commands = "Commands" in line and line.endswith(":")
            continue
        if in_commands and (m := re.match(r"^  ([a-z][a-z0-9-]*)\s", line)):
            h.subcommands.add(m[1])
        elif m := _FLAG.match(line):
            takes_value = m[3] not in ("false", "true")
            h.flags[f"--{m[2]}"] = takes_value
            if m[1]:
                h.flags[f"-{m[1]}"] = takes_value
    return h


@cache
def kubectl_help(path: tuple[str, ...]) -> Help | None:
    """``kubectl <path> --help`` parsed; None when kubectl knows no such command."""
    args = ["kubectl", *path, "--help"] if path else ["kubectl", "options"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    if r.returncode != 0 or (path and not r.stdout.startswith(("Usage", " ")) and
                             "Usage:" not in r.stdout):
        return None
    h = _parse_help(r.stdout)
    if path:  # a subcommand's help lists its own options; the global ones come from options
        root = kubectl_help(())
        assert root is not None
        h.flags = {**root.flags, **h.flags}
    else:
        h.subcommands = _parse_help(subprocess.run(
            ["kubectl", "--help"], capture_output=True, text=True, timeout=60,
            check=False).stdout).subcommands
    return h


def segments(line: str) -> list[list[str]]:
    """The commands of a shell line: its words split at pipes, ``&&``, ``||`` and ``;``."""
    lex = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lex.whitespace_split = True
    out: list[list[str]] = [[]]
    for tok in lex:
        if tok in _SEPARATORS:
            out.append([])
        else:
            out[-1].append(tok)
    return out


def check_line(line: str) -> list[str]:
    """What is wrong with one command line of a fix ([] when it runs as printed)."""
    try:
        parts = segments(line)
    except ValueError as err:
        return [f"{line!r}: does not parse as a shell line: {err}"]
    if any(not p for p in parts):
        return [f"{line!r}: an empty command"]
    problems = [f"{line!r}: placeholder {m.group()!r}" for p in parts for w in p
                for m in [_PLACEHOLDER.search(w)] if m]
    for i, words in enumerate(parts):
        prog = words[0]
        if prog == "kubectl":
            problems += _check_kubectl(words[1:])
        elif prog == "helm":
            problems += _check_helm(words[1:])
        elif prog == "gpubot":
            problems += _check_gpubot(words[1:])
        elif prog in OTHER:
            problems += _check_other(prog, words[1:])
        elif not (i > 0 and prog in FILTERS):
            problems.append(f"{prog!r}: not a program a fix may run (first) or filter (later)")
    return problems


def _flag_names(word: str, flags: Mapping[str, bool]) -> list[str] | None:
    """``-it`` -> ["-i", "-t"] when both are boolean short flags; else the word's name."""
    name = word.split("=", 1)[0]
    if name in flags or word.startswith("--") or len(name) <= 2:
        return [name]
    shorts = [f"-{c}" for c in name[1:]]
    if all(flags.get(s) is False for s in shorts):
        return shorts
    return [name]


def _check_kubectl(words: list[str]) -> list[str]:
    problems: list[str] = []
    path: list[str] = []
    helps = kubectl_help(())
    assert helps is not None, "kubectl options cannot be read"
    current = helps
    flags_seen: list[str] = []
    args: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--":
            break  # the rest is the command the debug pod runs
        if w.startswith("-") and len(w) > 1:
            flags_seen.append(w)
            names = _flag_names(w, current.flags)
            if names is not None and len(names) == 1 and current.flags.get(names[0]) \
                    and "=" not in w:
                flags_seen.append(words[i + 1] if i + 1 < len(words) else "")
                i += 1
            i += 1
            continue
        if not args and w in current.subcommands:
            nxt = kubectl_help((*path, w))
            if nxt is None:
                problems.append(f"kubectl {' '.join([*path, w])}: no such command")
                return problems
            path.append(w)
            current = nxt
        else:
            args.append(w)
        i += 1
    if not path:
        return [f"kubectl {' '.join(words[:2])}: no subcommand kubectl knows"]
    if current.subcommands and args:  # a group (rollout, set, create) takes one of its own
        problems.append(f"kubectl {' '.join(path)} {args[0]}: not one of its subcommands")
    # Flags against the final subcommand's help (global flags included).
    j = 0
    while j < len(flags_seen):
        w = flags_seen[j]
        names = _flag_names(w, current.flags) or []
        unknown = [n for n in names if n not in current.flags]
        if unknown:
            problems.append(f"kubectl {' '.join(path)}: unknown flag {', '.join(unknown)}")
        if len(names) == 1 and current.flags.get(names[0]) and "=" not in w:
            j += 1  # its value
        j += 1
    if path == ["patch"]:
        problems += _check_patch_payload(words)
    return problems


def _option(words: list[str], *names: str) -> str | None:
    for i, w in enumerate(words):
        for n in names:
            if w == n and i + 1 < len(words):
                return words[i + 1]
            if w.startswith(f"{n}="):
                return w.split("=", 1)[1]
    return None


def _check_patch_payload(words: list[str]) -> list[str]:
    """``kubectl patch RESOURCE NAME --type T -p JSON``: the JSON fits the kind."""
    after = words[words.index("patch") + 1:]
    kind_word = next((w for i, w in enumerate(after) if not w.startswith("-")
                      and (i == 0 or after[i - 1] not in ("-n", "--namespace", "--type", "-p",
                                                           "--patch"))), "")
    kind = RESOURCES.get(kind_word.split("/")[0])
    raw = _option(words, "-p", "--patch")
    kind_of_patch = _option(words, "--type") or "strategic"
    if raw is None:
        return ["kubectl patch without -p"]
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        return [f"kubectl patch -p is not JSON: {err}"]
    if kind is None:
        return [f"kubectl patch {kind_word}: no schema known for it"]
    if kind_of_patch == "json":
        out = []
        for op in value if isinstance(value, list) else [value]:
            if not isinstance(op, dict) or op.get("op") not in ("add", "replace", "remove"):
                out.append(f"json patch op {op!r}: not add/replace/remove")
                continue
            path = str(op.get("path", ""))
            dotted = path.strip("/").replace("/", ".")
            dotted = re.sub(r"\.(\d+|-)(?=\.|$)", "[0]", dotted)
            out += fits(kind, dotted, op.get("value"), whole=False)
        return out
    return fits(kind, "", value, whole=False)


def _check_helm(words: list[str]) -> list[str]:
    path = tuple(w for w in words[:2] if not w.startswith("-"))
    table = HELM.get(path) or HELM.get(path[:1])
    if table is None:
        return [f"helm {' '.join(path)}: not in the table taken from {HELM_SOURCE}"]
    cmd = path if path in HELM else path[:1]
    shorts = {f"-{s}": n for n, s in table.items() if s}
    problems = []
    i = len(cmd)
    while i < len(words):
        w = words[i]
        if w.startswith("-"):
            name = shorts.get(w, w[2:].split("=", 1)[0] if w.startswith("--") else w)
            if name not in table:
                problems.append(f"helm {' '.join(cmd)}: unknown flag {w} ({HELM_SOURCE})")
            elif name not in _HELM_BOOL and "=" not in w:
                i += 1
        i += 1
    return problems


def _check_gpubot(words: list[str]) -> list[str]:
    from handlers.registry import COMMANDS

    return [] if words and words[0] in COMMANDS else [f"gpubot {words[:1]}: no such command"]


def _check_other(prog: str, words: list[str]) -> list[str]:
    sub, flags = OTHER[prog]
    if tuple(words[:len(sub)]) != sub:
        return [f"{prog} {' '.join(words[:len(sub)])}: not {' '.join(sub)}"]
    return [f"{prog}: unknown flag {w}" for w in words[len(sub):]
            if w.startswith("-") and w.split("=", 1)[0] not in flags]


# -- schemas ---------------------------------------------------------------------------------


@cache
def _definitions() -> dict[str, Any]:
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    doc = json.loads((root / f"v{K8S_VERSION}-local-strict" / "_definitions.json").read_text())
    return dict(doc["$defs"])


@cache
def _crds() -> dict[str, dict[str, Any]]:
    return {(d := json.loads(p.read_text()))["kind"]: d for p in CRD_DIR.glob("*.json")}


def schemas_of(kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(apiVersion, schema) of ``kind``: the CRD's versions, or the built-in kind's, stable
    versions first."""
    crd = _crds().get(kind)
    if crd is not None:
        return [(f"{crd['group']}/{v['name']}", v["schema"]) for v in crd["versions"]]
    out = []
    for d in _definitions().values():
        props = d.get("properties") or {}
        if (props.get("kind") or {}).get("enum") == [kind]:
            api = (props.get("apiVersion") or {}).get("enum", [""])[0]
            out.append((api, d))
    return sorted(out, key=lambda x: ("alpha" in x[0], "beta" in x[0], x[0]))


def _resolve(s: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in s:
        s = _definitions()[s["$ref"].rsplit("/", 1)[-1]]
    if "allOf" in s and len(s["allOf"]) == 1:
        return _resolve({**{k: v for k, v in s.items() if k != "allOf"}, **s["allOf"][0]})
    return s


def _step(s: dict[str, Any], key: str) -> dict[str, Any] | None:
    s = _resolve(s)
    m = re.fullmatch(r"([^\[]+)\[(\d+)\]", key)
    name = m[1] if m else key
    props = s.get("properties") or {}
    if name in props:
        nxt = _resolve(props[name])
    elif isinstance(s.get("additionalProperties"), dict):
        nxt = _resolve(s["additionalProperties"])
    else:
        return None
    if m:
        items = nxt.get("items")
        return _resolve(items) if isinstance(items, dict) else None
    return nxt


def _types(s: dict[str, Any]) -> set[str]:
    t = s.get("type")
    if isinstance(t, list):
        return set(t)
    if isinstance(t, str):
        return {t}
    if s.get("x-kubernetes-int-or-string"):
        return {"integer", "string"}
    alts = s.get("oneOf") or s.get("anyOf") or []
    return set().union(*(_types(_resolve(a)) for a in alts)) if alts else set()


def _walk(s: dict[str, Any], value: Any, where: str) -> Iterator[str]:
    s = _resolve(s)
    types = _types(s)
    if value is None:
        return  # null removes a field in a merge
    if isinstance(value, dict):
        if types and "object" not in types:
            yield f"{where}: a mapping where the schema has {sorted(types)}"
            return
        props = s.get("properties") or {}
        extra = s.get("additionalProperties")
        for k, v in value.items():
            if k in props:
                yield from _walk(props[k], v, f"{where}.{k}")
            elif isinstance(extra, dict):
                yield from _walk(extra, v, f"{where}.{k}")
            elif extra is True or (extra is None and not props and
                                   s.get("x-kubernetes-preserve-unknown-fields")):
                continue
            else:
                yield f"{where}.{k}: no such field"
    elif isinstance(value, list):
        if types and "array" not in types:
            yield f"{where}: a list where the schema has {sorted(types)}"
            return
        for i, v in enumerate(value):
            yield from _walk(s.get("items") or {}, v, f"{where}[{i}]")
    else:
        want = {bool: "boolean", int: "integer", float: "number", str: "string"}[type(value)]
        ok = (not types or want in types or (want == "integer" and "number" in types))
        if not ok:
            yield f"{where}: {value!r} is a {want}, the schema wants {sorted(types)}"
        elif "enum" in s and value not in s["enum"]:
            yield f"{where}: {value!r} is not one of {s['enum']}"


def fits(kind: str, path: str, content: Any, *, whole: bool) -> list[str]:
    """What keeps ``content`` at ``path`` of ``kind`` from fitting its schema ([] when it
    fits one of the kind's versions). ``whole``: content is the whole object (its apiVersion
    picks the version, its kind and name must be set)."""
    versions = schemas_of(kind)
    if not versions:
        return [f"{kind}: no schema known"]
    if whole and isinstance(content, dict):
        versions = [(a, s) for a, s in versions if a == content.get("apiVersion")] or versions
        if content.get("kind") != kind or not (content.get("metadata") or {}).get("name"):
            return [f"{kind}: a whole object needs kind {kind} and metadata.name"]
    errors: list[str] = []
    for api, schema in versions:
        s: dict[str, Any] | None = schema
        for key in [k for k in path.split(".") if k]:
            s = _step(s, key) if s is not None else None
        if s is None:
            errors.append(f"{kind} ({api}): no field at {path}")
            continue
        # A list path takes the items added to it, a mapping path the fields merged in.
        found = list(_walk(s, content, f"{kind}.{path}" if path else kind))
        if not found:
            return []
        errors += [f"({api}) {e}" for e in found]
    return errors


def check_patch(p: Patch) -> list[str]:
    """A fix's patch: YAML that parses back to its content and fits the kind at its path."""
    import yaml

    if yaml.safe_load(p.text) != p.content:
        return [f"{p.ref}: its YAML does not read back as its content"]
    if not p.name:
        return [f"{p.kind}: a patch names its object"]
    return fits(p.kind, p.path, p.content, whole=not p.path)
