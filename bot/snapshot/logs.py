"""Container logs: ``==== START/END logs for container C of pod NS/POD ====`` blocks (the
`cluster-info dump` stream and its ``logs.txt`` files), plain pod log files, and the
termination messages in pod status. Pod log directories are read only when asked for."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from handlers.view import Obj

from . import files
from .model import LoadProblem

START_RE = re.compile(
    rb"^==== START logs for container (\S+) of pod ([^/\s]+)/(\S+) ====[ \t]*\r?$", re.M
)
_LOG_SUFFIXES = (".txt", ".log")
_STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
_SPEC_LISTS = ("initContainers", "containers", "ephemeralContainers")


_START_TEXT = b"==== START logs for container "


def find_start(data: bytes, pos: int = 0) -> re.Match[bytes] | None:
    """The next START line from ``pos``. A plain substring search first: a regex scan of
    hundreds of MB of JSON between the blocks would cost seconds."""
    i = data.find(_START_TEXT, pos)
    while i >= 0:
        match = START_RE.match(data, i)
        if match is not None:
            return match
        i = data.find(_START_TEXT, i + 1)
    return None


@dataclass(frozen=True)
class LogBlock:
    namespace: str
    pod: str
    container: str
    text: str
    closed: bool  # False when the END line is missing (file cut short)
    line: int  # of the START line, 1-based


def read_block(data: bytes, start: re.Match[bytes]) -> tuple[LogBlock, int]:
    """The block a START line opens, and the offset just past its END line."""
    container, ns, pod = start.groups()
    body = start.end()
    if data[body : body + 1] == b"\n":
        body += 1
    # kubectl writes the END line right after the log bytes, so it can share a line with
    # the last log line when the log lacks a final newline: search, do not match lines.
    end_marker = b"==== END logs for container %s of pod %s/%s ====" % (container, ns, pod)
    stop = data.find(end_marker, body)
    closed = stop >= 0
    if closed:
        eol = data.find(b"\n", stop)
        after = len(data) if eol < 0 else eol + 1
    else:
        nxt = find_start(data, body)
        stop = after = nxt.start() if nxt else len(data)
    block = LogBlock(
        namespace=ns.decode(errors="replace"),
        pod=pod.decode(errors="replace"),
        container=container.decode(errors="replace"),
        text=data[body:stop].decode("utf-8", "replace"),
        closed=closed,
        line=data.count(b"\n", 0, start.start()) + 1,
    )
    return block, after


def iter_blocks(data: bytes) -> Iterator[LogBlock]:
    """Every block of a logs file; text outside blocks is ignored."""
    pos = 0
    while (start := find_start(data, pos)) is not None:
        block, pos = read_block(data, start)
        yield block


@dataclass
class LogStore:
    """Log text by pod and container, with pod directories read on first use."""

    problems: list[LoadProblem]
    _blocks: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)
    _plain: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # namespace -> (DIR/<ns>, names of its pod subdirectories), read on first ask
    _pod_dirs: dict[str, list[tuple[str, set[str]]]] = field(default_factory=dict)
    _dirs_read: set[tuple[str, str]] = field(default_factory=set)
    added: int = 0  # texts stored so far, to tell which files gave logs

    def add_block(self, block: LogBlock) -> None:
        self.added += 1
        containers = self._blocks.setdefault((block.namespace, block.pod), {})
        containers.setdefault(block.container, []).append(block.text)

    def add_plain(self, namespace: str, pod: str, text: str) -> None:
        self.added += 1
        self._plain.setdefault((namespace, pod), []).append(text)

    def add_pod_dirs(self, namespace: str, parent: str, pods: set[str]) -> None:
        self._pod_dirs.setdefault(namespace, []).append((parent, pods))

    def __bool__(self) -> bool:
        return bool(self._blocks or self._plain or self._pod_dirs)

    def get(
        self, namespace: str, pod: str, container: str | None, pod_obj: Obj | None
    ) -> str | None:
        """Blocks and termination messages of the container (all containers, in spec
        order, when ``container`` is None), else the pod's plain log; None if none."""
        key = (namespace, pod)
        self._read_dirs(key)
        blocks = self._blocks.get(key, {})
        messages = termination_messages(pod_obj)
        names = [container] if container else _container_order(pod_obj, blocks, messages)
        parts: list[str] = []
        for name in names:
            parts.extend(_with_messages(blocks.get(name, []), messages.get(name, [])))
        # A plain logs.txt does not say which container wrote it: it answers for any.
        if container is None or not parts:
            parts.extend(self._plain.get(key, []))
        return join_parts(parts) if parts else None

    def _read_dirs(self, key: tuple[str, str]) -> None:
        if key in self._dirs_read:
            return
        self._dirs_read.add(key)
        namespace, pod = key
        for parent, pods in self._pod_dirs.get(namespace, []):
            if pod not in pods:
                continue
            path = os.path.join(parent, pod)
            try:
                names = sorted(e.name for e in os.scandir(path) if e.is_file())
            except FileNotFoundError:
                continue  # cluster-info dump writes no directory for a pod without logs
            except OSError as err:
                self.problems.append(LoadProblem(path, None, f"cannot read: {err.strerror}"))
                continue
            names.sort(key=lambda n: n != "logs.txt")  # kubectl's own file first
            for name in names:
                if name.endswith(_LOG_SUFFIXES) and not name.startswith("."):
                    self.read_file(os.path.join(path, name), *key)

    def read_file(self, path: str, namespace: str, pod: str) -> None:
        try:
            data = files.read_file(path)
        except files.NotAFile as err:
            self.problems.append(LoadProblem(path, None, f"cannot read: {err}"))
            return
        except OSError as err:
            self.problems.append(LoadProblem(path, None, f"cannot read: {err.strerror}"))
            return
        self.add_text(path, data, namespace, pod)

    def add_text(self, path: str, data: bytes, namespace: str, pod: str) -> None:
        """A pod's log file: START/END blocks if it has them, else the pod's plain log."""
        if find_start(data) is None:
            if data.strip():
                self.add_plain(namespace, pod, data.decode("utf-8", "replace"))
            return
        for block in iter_blocks(data):
            self.add_block(block)
            if not block.closed:
                self.problems.append(unclosed(path, block))


def unclosed(path: str, block: LogBlock) -> LoadProblem:
    return LoadProblem(
        path,
        f"line {block.line}",
        f"log of container {block.container} of pod {block.namespace}/{block.pod} has no "
        "END line (file cut short?)",
    )


def termination_messages(pod: Obj | None) -> dict[str, list[str]]:
    """``lastState``/``state.terminated.message`` per container, oldest first."""
    out: dict[str, list[str]] = {}
    status = pod.get("status") if pod else None
    if not isinstance(status, dict):
        return out
    for list_key in _STATUS_LISTS:
        for cstatus in _dict_items(status.get(list_key)):
            for state_key in ("lastState", "state"):
                state = cstatus.get(state_key)
                term = state.get("terminated") if isinstance(state, dict) else None
                msg = term.get("message") if isinstance(term, dict) else None
                if isinstance(msg, str) and msg.strip():
                    out.setdefault(str(cstatus.get("name", "")), []).append(msg)
    return out


def _container_order(
    pod: Obj | None, blocks: dict[str, list[str]], messages: dict[str, list[str]]
) -> list[str]:
    names: list[str] = []
    spec = pod.get("spec") if pod else None
    if isinstance(spec, dict):
        for list_key in _SPEC_LISTS:
            names.extend(str(c.get("name", "")) for c in _dict_items(spec.get(list_key)))
    names.extend(blocks)
    names.extend(messages)
    return list(dict.fromkeys(names))


def _with_messages(texts: list[str], messages: list[str]) -> list[str]:
    # With terminationMessagePolicy FallbackToLogsOnError the message repeats the log tail.
    return texts + [m for m in messages if not any(m.strip() in t for t in texts)]


def join_parts(parts: list[str]) -> str:
    """Log pieces as one text, each ending in a newline but the last."""
    return "".join(p if p.endswith("\n") or i == len(parts) - 1 else p + "\n"
                   for i, p in enumerate(parts))


def _dict_items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
