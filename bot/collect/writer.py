"""The snapshot on disk, in the layout ``bot.snapshot`` loads (docs/design.md, Snapshots):

    DIR/gpubot-snapshot.yaml   the manifest (bot/snapshot/manifest.py)
    DIR/<plural>.json          one typed list per kind, one object a line, written even when
                               empty: an empty list means "none", a missing one "not captured"
    DIR/logs.txt               container logs in cluster-info dump's START/END blocks

or the same files under ``<name>/`` in a gzipped tar (``-o NAME.tgz`` / ``.tar.gz``), written
to a temporary file beside it and renamed into place, so a failed run leaves nothing half
written.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import yaml

from bot.live.kinds import KINDS
from bot.snapshot.manifest import FILE_NAME, Manifest
from handlers.view import Obj

ARCHIVE_SUFFIXES = (".tgz", ".tar.gz")
LOGS_FILE = "logs.txt"


class OutputError(Exception):
    """``-o`` names a place a snapshot cannot be written; the message says why and what to
    give instead."""


def is_archive(path: Path) -> bool:
    return path.name.endswith(ARCHIVE_SUFFIXES)


def check_output(path: Path) -> None:
    """Refuse, before anything is read, an ``-o`` that cannot take a snapshot."""
    if str(path) in ("", "-"):
        raise OutputError("-o: give a directory or a FILE.tgz (a snapshot is several files, "
                          "not a stream)")
    if is_archive(path):
        parent = path.parent
        if path.exists():
            raise OutputError(f"-o {path}: already exists; remove it or give a new name")
        if not parent.is_dir():
            raise OutputError(f"-o {path}: no directory {parent} to write it in")
        if not os.access(parent, os.W_OK):
            raise OutputError(f"-o {path}: directory {parent} is not writable")
        return
    if path.suffix.lower() in (".json", ".yaml", ".yml", ".zip", ".tar", ".gz", ".txt"):
        raise OutputError(f"-o {path}: a snapshot is a directory or a .tgz file; give DIR or "
                          f"{path.with_suffix('.tgz')}")
    if path.exists() and not path.is_dir():
        raise OutputError(f"-o {path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise OutputError(f"-o {path}: directory is not empty; give a new or empty one, so "
                          "that no older file joins the snapshot")
    existing = next((p for p in [path, *path.parents] if p.exists()), Path("."))
    if not os.access(existing, os.W_OK):
        raise OutputError(f"-o {path}: {existing} is not writable")


def files(objects: dict[str, list[Obj]], logs: list[tuple[str, str, str, str]],
          manifest: Manifest) -> Iterator[tuple[str, bytes]]:
    """(file name, content) of every file of the snapshot."""
    yield FILE_NAME, yaml.safe_dump(manifest.to_doc(), sort_keys=False).encode()
    for kind in sorted(objects):
        info = KINDS.get(kind)
        plural = info.plural if info else kind.lower() + "s"
        api = info.api_version if info else "v1"
        yield f"{plural}.json", _list(kind, api, objects[kind])
    if logs:
        yield LOGS_FILE, _logs(logs)


def write(path: Path, contents: Iterator[tuple[str, bytes]]) -> None:
    """Raises OSError."""
    if is_archive(path):
        _write_archive(path, contents)
        return
    path.mkdir(parents=True, exist_ok=True)
    for name, data in contents:
        (path / name).write_bytes(data)


def _write_archive(path: Path, contents: Iterator[tuple[str, bytes]]) -> None:
    top = path.name.removesuffix(".tar.gz").removesuffix(".tgz") or "snapshot"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as gz, \
                tarfile.open(fileobj=gz, mode="w") as tar:
            for name, data in contents:
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _list(kind: str, api_version: str, items: list[Obj]) -> bytes:
    """A typed list (``PodList``: the loader knows its kind even when it is empty), one item
    a line: compact, and still greppable."""
    head = orjson.dumps({"apiVersion": api_version, "kind": f"{kind}List"})[:-1]
    body = b",\n".join(orjson.dumps(o) for o in items)
    return head + b',"items":[\n' + body + (b"\n" if items else b"") + b"]}\n"


def _logs(logs: list[tuple[str, str, str, str]]) -> bytes:
    out = []
    for ns, pod, container, text in logs:
        out.append(f"==== START logs for container {container} of pod {ns}/{pod} ====\n")
        out.append(text)  # the END line may share its last line, as kubectl writes it
        out.append(f"==== END logs for container {container} of pod {ns}/{pod} ====\n")
    return "".join(out).encode()
