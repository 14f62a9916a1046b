"""Reading a snapshot from disk: files and directories of any format in
docs snapshot-format.md, told apart by their content.

Bad input never sinks the snapshot: each unreadable file, document or list item becomes a
``LoadProblem`` and loading goes on. Only a missing path, or a snapshot of which nothing
could be read, raises ``SnapshotError``.
"""

from __future__ import annotations

import gc
import io
import json
import os
import re
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from handlers.kube.shape import misfit
from handlers.kube.shape_types import PROJECTED, list_decoder, project
from handlers.view import CLUSTER_SCOPED, Obj

from . import jsonparse, manifest, yamlparse
from .files import NotAFile, kernel_path, read_file
from .logs import LogStore, find_start, read_block, unclosed
from .model import (
    DUMP_KINDS,
    DUMP_NAMESPACE_FILES,
    FILE_KINDS,
    USED_KINDS,
    LoadProblem,
    SnapshotError,
)
from .timestamps import UNSTAMPED_KINDS, stamp_reader
from .view import SnapshotView

# A dump's lists of these are read on first ask (``_Loader._defer``): one object per
# rollout revision, and a diagnosis reads those of one workload, or none. Their
# timestamps do not count towards the snapshot's "now", whenever they are read.
DEFERRED_KINDS = UNSTAMPED_KINDS
# Not snapshots even when they quote Kubernetes YAML; skipped unread.
_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".html", ".htm")
_LOG_SUFFIXES = (".txt", ".log")
_GZIP_MAGIC = b"\x1f\x8b"
# Most bytes read from standard input or inflated from one .gz file: more than any real
# dump file (a 30,000-pod pods.json is ~200 MB), little enough that a gzip bomb cannot
# exhaust the machine.
MAX_INFLATED = 2 << 30
_ARCHIVE_MAGIC = (b"PK\x03\x04", b"BZh", b"\xfd7zXZ", b"(\xb5/\xfd")
_NON_SPACE = re.compile(rb"\S")
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # PowerShell 5 `>` writes UTF-16


def load_snapshot(path: str | Path, *, stdin: BinaryIO | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  whole: bool = False) -> SnapshotView:
    """Read a snapshot file or directory (``-``: ``stdin``, default the process's).
    ``progress(files, bytes)`` is called after each file read. Objects of the bulk kinds
    hold only the fields handlers read (handlers/kube/shape_types.py) unless ``whole``
    (``gpubot snapshot`` copying one: later releases may read more). Raises SnapshotError
    when there is nothing."""
    loader = _Loader(progress=progress, whole=whole)
    if str(path) == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        data = stream.read(MAX_INFLATED + 1)
        if len(data) > MAX_INFLATED:
            raise SnapshotError(f"snapshot on standard input: larger than "
                                f"{MAX_INFLATED >> 20} MB")
        with _no_cyclic_gc(), _heap_kept():
            loader.load_bytes(Path("stdin"), data)
        path = "stdin"
    else:
        root = Path(path)
        if not root.exists():
            raise SnapshotError(f"snapshot {path}: no such file or directory" + _near(root))
        kernel = kernel_path(str(root))
        if kernel:
            raise SnapshotError(f"snapshot {path}: {kernel}")
        with _no_cyclic_gc(), _heap_kept():
            if root.is_dir():
                loader.load_dir(root)
            else:
                loader.load_file(root)
    if not loader.objects and not loader.logs:
        raise SnapshotError(_nothing_read(str(path), loader.problems))
    return SnapshotView(
        str(path),
        objects=loader.objects,
        kinds=loader.kinds,
        stamps=loader.stamps,
        logs=loader.logs,
        problems=loader.problems,
        files=loader.files,
        configz=loader.configz,
        manifest=loader.manifest,
        from_dump=loader.from_dump,
        deferred=loader.deferred,
        read_deferred=partial(read_deferred, whole=whole),
    )


def read_deferred(paths: list[Path], *, whole: bool = False
                  ) -> tuple[dict[str, list[Obj]], list[LoadProblem], list[str]]:
    """The objects, problems and files of dump files load_snapshot left for later."""
    loader = _Loader(whole=whole)
    with _no_cyclic_gc(), _heap_kept():
        for path in paths:
            loader.load_file(path)
    return loader.objects, loader.problems, loader.files


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cycle collector while loading, then freeze what was loaded.

    Parsed objects are acyclic trees that refcounting frees. Left to the collector, each
    pass rescans all of them: keeping 30,000 parsed pods took 5x longer than parsing them,
    and the handlers' work after it 6x longer. Frozen objects are still freed by refcount;
    collecting first keeps garbage cycles of the caller out of the freeze.
    """
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


# mallopt(3) parameters, and glibc's defaults to go back to.
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 128 * 1024, 65536


@contextmanager
def _heap_kept() -> Iterator[None]:
    """Keep memory freed while loading in the process's heap, for the next file.

    Each file's bytes, and orjson's scratch space for parsing them, are large blocks that
    glibc gives back to the kernel when freed (an mmap of their own, or a trim of the
    heap's top); the next file then faults in fresh zeroed pages again. A 650 MB dump
    spent a third of its parsing time in those page faults (system time). Without libc's
    mallopt (not glibc) this does nothing.
    """
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        yield
        return
    mallopt(_M_MMAP_MAX, 0)
    mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield
    finally:
        mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
        mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)


def _nothing_read(path: str, problems: list[LoadProblem]) -> str:
    if not problems:
        return f"snapshot {path}: no Kubernetes objects or pod logs found"
    shown = "; ".join(str(p) for p in problems[:3])
    more = f" (and {len(problems) - 3} more problems)" if len(problems) > 3 else ""
    return f"snapshot {path}: nothing could be read: {shown}{more}"


@dataclass
class _FileContext:
    """What a file's place says about its content, and what it gave."""

    path: str
    namespace: str | None  # DIR/<ns>/pods.json: objects without a namespace are in <ns>
    file_kind: str | None  # pods.json: items without a kind are Pods
    kept: int = 0
    documents: int = 0
    # Problems with the shape of documents count only in a file that holds Kubernetes
    # objects at all: a JSON array of strings elsewhere is just not a snapshot.
    is_kubernetes: bool = False
    shape_problems: list[LoadProblem] = field(default_factory=list)

    @classmethod
    def of(cls, path: Path) -> _FileContext:
        stem = path.name.split(".", 1)[0].lower()
        namespace = path.parent.name if stem in DUMP_NAMESPACE_FILES and path.parent.name else None
        return cls(str(path), namespace, FILE_KINDS.get(stem))


@dataclass
class _Loader:
    objects: dict[str, list[Obj]] = field(default_factory=dict)
    kinds: set[str] = field(default_factory=set)  # also kinds seen as empty lists
    # The kept objects' timestamps, for the snapshot's "now": gathered as each object is
    # kept, because a pass over every object afterwards misses the cache at each one.
    stamps: set[Any] = field(default_factory=set)
    problems: list[LoadProblem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    # node -> (its kubelet's configuration as /configz gave it, the file)
    configz: dict[str, tuple[Obj, str]] = field(default_factory=dict)
    logs: LogStore = field(init=False)
    manifest: manifest.Manifest | None = None  # gpubot snapshot's gpubot-snapshot.yaml
    # Part of it is `kubectl cluster-info dump` output: what it lacks is then said to be
    # what a dump leaves out, not what a `kubectl get` forgot to ask for.
    from_dump: bool = False
    _seen_dirs: set[str] = field(default_factory=set)
    progress: Callable[[int, int], None] | None = None
    whole: bool = False  # keep every field of every object (load_snapshot's ``whole``)
    _read_files: int = 0
    _read_bytes: int = 0
    # kind -> dump files of DEFERRED_KINDS, read when a diagnosis first asks for the kind
    deferred: dict[str, list[Path]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logs = LogStore(self.problems)

    # -- walking ---------------------------------------------------------------------------

    def load_dir(self, directory: Path) -> None:
        real = os.path.realpath(directory)
        if real in self._seen_dirs:  # a symlink loop, or the same tree linked twice
            return
        self._seen_dirs.add(real)
        try:
            entries = sorted(
                (e for e in os.scandir(directory) if not e.name.startswith(".")),
                key=lambda e: e.name,
            )
        except OSError as err:
            self._problem(str(directory), None, f"cannot read directory: {err.strerror}")
            return
        pods_before = len(self.objects.get("Pod", ()))
        for entry in entries:
            if _is_file(entry):
                if not self._defer(Path(entry.path)):
                    self.load_file(Path(entry.path))
            elif entry.is_symlink() and not os.path.exists(entry.path):
                self._problem(entry.path, None, "cannot read: broken symbolic link")
        # DIR/<ns>/<pod>/ holds only that pod's logs: read them when asked for. A dump of
        # 30,000 pods has 30,000 such directories.
        pod_dirs = self._pods_loaded_since(pods_before, directory.name)
        if pod_dirs:
            self.logs.add_pod_dirs(directory.name, str(directory), pod_dirs)
        for entry in entries:
            if entry.name not in pod_dirs and _is_dir(entry):
                self.load_dir(Path(entry.path))

    def _cuts(self, kind: str) -> bool:
        """Objects of ``kind`` keep only the fields handlers read (shape_types.py)."""
        return kind in PROJECTED and not self.whole

    def _defer(self, path: Path) -> bool:
        """Leave a dump's DIR/<ns>/replicasets.json (or deployments.json) for later when
        its head says it is that list: most diagnoses read few or none of them."""
        ctx = _FileContext.of(path)
        kind = ctx.file_kind
        if kind not in DEFERRED_KINDS or ctx.namespace is None:
            return False
        try:
            with open(path, "rb") as f:
                head = _TYPED_LIST.match(f.read(256))
        except OSError:
            return False  # read now, and say why it could not be
        if head is None or head.group(1).decode() != kind:
            return False
        self.deferred.setdefault(kind, []).append(path)
        self.kinds.add(kind)
        self.from_dump = True  # a typed list in a namespace's directory: a dump's
        return True

    def _pods_loaded_since(self, start: int, namespace: str) -> set[str]:
        pods = self.objects.get("Pod", [])[start:]
        return {p["metadata"]["name"] for p in pods if p["metadata"]["namespace"] == namespace}

    def load_file(self, path: Path) -> None:
        if path.name.endswith(_DOC_SUFFIXES):
            return
        try:
            data = read_file(str(path))
        except NotAFile as err:
            self._problem(str(path), None, f"cannot read: {err}")
            return
        except OSError as err:
            self._problem(str(path), None, f"cannot read: {err.strerror}")
            return
        self.load_bytes(path, data)

    def load_bytes(self, path: Path, data: bytes) -> None:
        """One file's content; gzip (``kubectl ... | gzip``) is read as it is."""
        self._read_files += 1
        self._read_bytes += len(data)
        if data.startswith(_GZIP_MAGIC):
            try:
                data = _gunzip(data, MAX_INFLATED)
            except (EOFError, zlib.error) as err:
                self._problem(str(path), None, f"cannot decompress gzip: {err}")
                return
        if _is_tar(data):  # gpubot snapshot -o FILE.tgz, or any tar of a snapshot
            self._read_tar(path, data)
            return
        # pods.json.gz is read as pods.json would be; messages name the file itself.
        named = path.with_name(path.name[:-3]) if path.name.endswith(".gz") else path
        ctx = _FileContext.of(named)
        ctx.path = str(path)
        logs_before = self.logs.added
        self._read(ctx, named, data)
        if ctx.is_kubernetes:
            self.problems.extend(ctx.shape_problems)
        if ctx.kept or self.logs.added != logs_before:
            self.files.append(ctx.path)
        if self.progress is not None:
            self.progress(self._read_files, self._read_bytes)

    def _read_tar(self, path: Path, data: bytes) -> None:
        """Each regular file of a tar archive, read in memory as if it were on disk at
        ``path/member``: nothing is extracted, links and devices are skipped."""
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                for member in tar:
                    parts = [p for p in member.name.split("/") if p not in ("", ".", "..")]
                    if (not member.isfile() or not parts or parts[-1].startswith(".")
                            or parts[-1].endswith(_DOC_SUFFIXES)):
                        continue
                    content = tar.extractfile(member)
                    if content is not None:
                        self.load_bytes(path.joinpath(*parts), content.read())
        except (tarfile.TarError, EOFError) as err:
            self._problem(str(path), None, f"cannot read the tar archive: {err}")

    # -- telling formats apart ---------------------------------------------------------------

    def _read(self, ctx: _FileContext, path: Path, data: bytes) -> None:
        data = _as_utf8(data)
        first = _NON_SPACE.search(data)
        head = first.group() if first else b""
        if not head:
            if not path.name.endswith(_LOG_SUFFIXES):  # an empty log is a fine log
                self._problem(ctx.path, None, "empty file")
        elif data.startswith(_ARCHIVE_MAGIC):
            self._problem(ctx.path, None, "compressed or archive file: unpack it first")
        elif b"\x00" in data[:8192]:
            self._problem(ctx.path, None, "binary data, not a snapshot")
        elif head in (b"{", b"["):
            self._read_json(ctx, data)
        elif find_start(data):
            self._read_stream(ctx, data)
        elif path.name == "logs.txt" and path.parent.name and path.parent.parent.name:
            # DIR/<ns>/<pod>/logs.txt without START/END lines: the pod's plain log.
            self.logs.add_text(ctx.path, data, path.parent.parent.name, path.parent.name)
        elif yamlparse.K8S_HINT.search(data):
            self._read_yaml(ctx, data)
        # Anything else is not Kubernetes data: skipped without a word.

    def _read_json(self, ctx: _FileContext, data: bytes) -> None:
        if self._read_typed(ctx, data):
            return
        try:
            value = jsonparse.loads(data)
        except json.JSONDecodeError as err:
            if "UTF-8" in err.msg:  # orjson refuses the whole file for one bad byte
                data = data.decode("utf-8", "replace").encode()
            self._read_stream(ctx, data)  # several documents, or a broken one
            return
        ctx.documents += 1
        self._add_document(ctx, value, "document 1")

    def _read_typed(self, ctx: _FileContext, data: bytes) -> bool:
        """A kubectl JSON list of one kind whose tables list what handlers read (the bulk
        of any large snapshot), decoded into those fields only; False when the document is
        anything else or has an object that does not fit, and must go the careful way."""
        typed = _TYPED_LIST.match(data) or _GET_LIST.match(data)
        if typed is None or not self._cuts(kind := typed.group(1).decode()):
            return False
        list_kind = f"{kind}List" if typed.re is _TYPED_LIST else "List"
        try:
            doc = list_decoder(kind).decode(data)
        except msgspec.MsgspecError:
            return False
        items = doc.get("items") or []
        if doc.get("kind") != list_kind or not all(
                item.get("kind", kind) == kind and "name" in item.get("metadata", {})
                for item in items):
            return False
        ctx.documents += 1
        ctx.is_kubernetes = True
        if list_kind != "List" and kind in DUMP_KINDS:
            self.from_dump = True
        self.kinds.add(kind)
        api = doc.get("apiVersion") if list_kind != "List" else None
        self._add_items(ctx, items, kind, api, "document 1", decoded=True)
        return True

    def _read_stream(self, ctx: _FileContext, data: bytes) -> None:
        """Documents one after another with log blocks between them."""
        pos = 0
        while pos < len(data):
            start = find_start(data, pos)
            stop = start.start() if start else len(data)
            self._read_region(ctx, data, pos, stop)
            if start is None:
                return
            block, pos = read_block(data, start)
            self.from_dump = True  # START/END log blocks are the dump's
            self.logs.add_block(block)
            if not block.closed:
                self.problems.append(unclosed(ctx.path, block))

    def _read_region(self, ctx: _FileContext, data: bytes, start: int, stop: int) -> None:
        first = _NON_SPACE.search(data, start, stop)
        if first is None:
            return
        if first.group() not in (b"{", b"["):
            if yamlparse.K8S_HINT.search(data, start, stop):  # `cluster-info dump -o yaml`
                line = data.count(b"\n", 0, start) + 1
                self._read_yaml(ctx, data[start:stop], first_line=line)
            return
        for doc in jsonparse.iter_docs(data, start, stop):
            ctx.documents += 1
            where = f"document {ctx.documents}"
            if isinstance(doc, jsonparse.JsonDoc):
                self._add_document(ctx, doc.value, where)
            else:
                self._json_failure(ctx, doc, where)

    def _json_failure(self, ctx: _FileContext, fail: jsonparse.JsonFailure, where: str) -> None:
        items = len(fail.recovered["items"]) if fail.recovered else 0
        if fail.truncated:
            message = f"{where} is cut short (truncated file?)"
        else:
            message = f"invalid JSON in {where}: {fail.message}"
        if fail.recovered is not None:
            message += f"; kept the {items} complete list items it could read"
        self._problem(ctx.path, f"line {fail.line}, column {fail.column}", message)
        if fail.recovered is not None:
            self._add_document(ctx, fail.recovered, where)

    def _read_yaml(self, ctx: _FileContext, data: bytes, first_line: int = 1) -> None:
        text = data.decode("utf-8", "replace")
        for doc in yamlparse.iter_docs(text, first_line):
            ctx.documents += 1
            where = f"document {ctx.documents}"
            if isinstance(doc, yamlparse.YamlDoc):
                self._add_document(ctx, doc.value, where)
                continue
            message = f"invalid YAML in {where}: {doc.message}"
            if doc.recovered is not None:
                message += (f"; kept the {len(doc.recovered['items'])} complete list items "
                            "it could read")
            at = f"line {doc.line}, column {doc.column}" if doc.column else f"line {doc.line}"
            self._problem(ctx.path, at, message)
            if doc.recovered is not None:
                self._add_document(ctx, doc.recovered, where)

    # -- documents and objects ---------------------------------------------------------------

    def _add_document(self, ctx: _FileContext, value: Any, where: str) -> None:
        if isinstance(value, list):  # a bare array of objects
            for number, item in enumerate(value, 1):
                self._add_object(ctx, item, ctx.file_kind, None, where, number)
            return
        if not isinstance(value, dict):
            self._shape_problem(ctx, where, f"not a Kubernetes object (a {_type_name(value)})")
            return
        if value.get("kind") == manifest.KIND:
            self._add_manifest(ctx, value, where)
            return
        config = _kubelet_config(value)
        if config is not None:
            self._add_configz(ctx, config, where)
            return
        kind = value.get("kind")
        items = value.get("items")
        if items is None and _is_list_kind(kind):  # kubectl may print an empty list as null
            items = []
        if isinstance(items, list) and (kind is None or _is_list_kind(kind)):
            if kind is not None or ctx.file_kind or "apiVersion" in value or "metadata" in value:
                ctx.is_kubernetes = True
                self._add_list(ctx, value, items, where)
        elif kind is not None or ctx.file_kind or _looks_like_object(value):
            self._add_object(ctx, value, ctx.file_kind, None, where, None)
        # A mapping with none of kind, apiVersion, metadata or items is not Kubernetes data.

    def _add_list(self, ctx: _FileContext, doc: Obj, items: list[Any], where: str) -> None:
        kind = doc.get("kind")
        from_list = kind[:-4] if isinstance(kind, str) and kind != "List" else None
        item_kind = from_list or ctx.file_kind
        # `kubectl get` prints `kind: List`; a dump prints its kinds' typed lists.
        if from_list in DUMP_KINDS:
            self.from_dump = True
        # A PodList's apiVersion is its Pods'; a generic List's says nothing about items.
        api = doc.get("apiVersion") if from_list else None
        if item_kind in USED_KINDS:
            self.kinds.add(item_kind)
            self._add_items(ctx, items, item_kind, api, where)
        elif from_list is None:  # a generic List: every item says what it is
            for number, item in enumerate(items, 1):
                self._add_object(ctx, item, item_kind, api, where, number)
        # else a ServiceList or the like: nothing the bot reads

    def _add_items(
        self, ctx: _FileContext, items: list[Any], kind: str, api: Any, where: str,
        *, decoded: bool = False,
    ) -> None:
        """_add_object for the items of one kind, inlined: a dump has 30,000 Pods.
        ``decoded``: items that _read_typed decoded, checked and cut down to the fields
        handlers read already."""
        bucket = self.objects.setdefault(kind, [])
        namespace = None if kind in CLUSTER_SCOPED else ctx.namespace or "default"
        kept = len(bucket)
        read_stamps, add_stamp = stamp_reader(kind), self.stamps.add
        projected = self._cuts(kind)
        for number, item in enumerate(items, 1):
            meta = item.get("metadata") if item.__class__ is dict else None
            if (
                meta.__class__ is not dict
                or meta.get("name").__class__ is not str
                or item.get("kind", kind) != kind
            ):
                self._add_object(ctx, item, kind, api, where, number)  # the careful way
                continue
            item["kind"] = kind
            if not decoded:
                bad = misfit(item)
                if bad is None and projected:
                    item, bad = _project(item)
                    meta = item["metadata"]
                if bad is not None:
                    self._misfit(ctx, item, bad, _at(where, number))
                    continue
            if api and "apiVersion" not in item:
                item["apiVersion"] = api
            if namespace and not meta.get("namespace"):
                meta["namespace"] = namespace
            meta.pop("managedFields", None)
            bucket.append(item)
            read_stamps(item, add_stamp)  # while the object is still in the cache
        ctx.kept += len(bucket) - kept

    def _add_object(
        self,
        ctx: _FileContext,
        obj: Any,
        default_kind: str | None,
        api: Any,
        where: str,
        item: int | None,
    ) -> None:
        if not isinstance(obj, dict):
            self._shape_problem(ctx, _at(where, item), f"not an object (a {_type_name(obj)})")
            return
        if _looks_like_object(obj) or "kind" in obj:
            ctx.is_kubernetes = True
        kind = obj.get("kind") or default_kind
        if not isinstance(kind, str):
            self._shape_problem(ctx, _at(where, item), "object without kind")
            return
        if kind not in USED_KINDS:  # includes Secret: never held
            return
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            self._shape_problem(ctx, _at(where, item), f"{kind} without metadata.name")
            return
        if "kind" not in obj or not obj["kind"]:
            obj["kind"] = kind
        bad = misfit(obj)
        if bad is None and self._cuts(kind):
            obj, bad = _project(obj)
            meta = obj["metadata"]
        if bad is not None:
            self._misfit(ctx, obj, bad, _at(where, item))
            return
        if api and "apiVersion" not in obj:
            obj["apiVersion"] = api
        if kind not in CLUSTER_SCOPED and not meta.get("namespace"):
            meta["namespace"] = ctx.namespace or "default"
        meta.pop("managedFields", None)  # big, and never read
        self.objects.setdefault(kind, []).append(obj)
        stamp_reader(kind)(obj, self.stamps.add)
        ctx.kept += 1

    def _add_configz(self, ctx: _FileContext, config: Obj, where: str) -> None:
        """A node's kubelet configuration: its file names the node (docs: README,
        Snapshots)."""
        ctx.is_kubernetes = True
        node = _configz_node(ctx.path)
        if node is None:
            self._shape_problem(ctx, where, "a kubelet configuration (/configz) whose file "
                                "name names no node: save it as configz/<node>.json")
            return
        self.configz[node] = (config, ctx.path)
        ctx.kept += 1

    def _add_manifest(self, ctx: _FileContext, doc: Obj, where: str) -> None:
        ctx.is_kubernetes = True
        try:
            self.manifest = manifest.Manifest.from_doc(doc)
        except ValueError as err:
            self._shape_problem(ctx, where, f"{manifest.KIND}: {err}")
            return
        ctx.kept += 1

    def _problem(self, path: str, where: str | None, message: str) -> None:
        self.problems.append(LoadProblem(path, where, message))

    @staticmethod
    def _shape_problem(ctx: _FileContext, where: str, message: str) -> None:
        ctx.shape_problems.append(LoadProblem(ctx.path, where, message))

    @staticmethod
    def _misfit(ctx: _FileContext, obj: Obj, field: str, where: str) -> None:
        """An object with a field handlers cannot read: skipped, and said so."""
        meta = obj["metadata"]
        ns = meta.get("namespace")
        name = f"{ns}/{meta['name']}" if isinstance(ns, str) and ns else meta["name"]
        ctx.shape_problems.append(
            LoadProblem(ctx.path, where, f"{obj['kind']} {name}: {field}; skipped",
                        namespace=ns if isinstance(ns, str) else None))


# The heads kubectl prints: `cluster-info dump` (a typed list, kind first) and
# `get -o json` (a List, keys sorted, so the first item's kind comes early).
_TYPED_LIST = re.compile(rb'\A\s*\{\s*"kind"\s*:\s*"([A-Za-z]{1,63})List"')
_GET_LIST = re.compile(
    rb'\A\s*\{\s*"apiVersion"\s*:\s*"[^"\\]{0,100}"\s*,\s*"items"\s*:\s*\[\s*\{'
    rb'\s*"apiVersion"\s*:\s*"[^"\\]{0,100}"\s*,\s*"kind"\s*:\s*"([A-Za-z]{1,63})"')


def _project(obj: Obj) -> tuple[Obj, str | None]:
    """``obj`` cut down to the fields handlers read, and None; or ``obj`` and why not."""
    try:
        return project(obj), None
    except msgspec.ValidationError as err:  # a key misfit() does not look at (a number)
        return obj, str(err)


def _kubelet_config(value: Obj) -> Obj | None:
    """The KubeletConfiguration of a kubelet's /configz answer (``{"kubeletconfig": {...}}``)
    or of the Kubernetes docs' recipe that gives it a kind (``kind: KubeletConfiguration``),
    else None."""
    inner = value.get("kubeletconfig")
    if isinstance(inner, dict) and len(value) == 1:
        return inner
    if value.get("kind") == "KubeletConfiguration" and not isinstance(
            value.get("metadata"), dict):
        return {k: v for k, v in value.items() if k not in ("kind", "apiVersion")}
    return None


_CONFIGZ_EXT = re.compile(r"\.(?:json|ya?ml)$")
_CONFIGZ_PREFIX = "kubelet_configz_"


def _configz_node(path: str) -> str | None:
    """The node a /configz file is about: ``configz/<node>.json`` (any of .json, .yaml, .yml,
    gzipped or not), or ``kubelet_configz_<node>`` as the Kubernetes docs' recipe names it."""
    p = Path(path)
    name = p.name[:-3] if p.name.endswith(".gz") else p.name
    stem = _CONFIGZ_EXT.sub("", name, count=1)
    if stem.startswith(_CONFIGZ_PREFIX):
        return stem[len(_CONFIGZ_PREFIX):] or None
    if p.parent.name == "configz":
        return stem or None
    return None


def _gunzip(data: bytes, limit: int) -> bytes:
    """gzip members one after another (``cat a.gz b.gz`` is valid gzip), at most ``limit``
    bytes out. Raises EOFError when cut short or larger than ``limit``, zlib.error when
    corrupt."""
    parts: list[bytes] = []
    size = 0
    while data.startswith(_GZIP_MAGIC):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        buf = data
        while buf and not d.eof:
            piece = d.decompress(buf, limit + 1 - size)
            size += len(piece)
            if size > limit:
                raise EOFError(f"it inflates to more than {limit >> 20} MB")
            parts.append(piece)
            buf = d.unconsumed_tail
        if not d.eof:
            raise EOFError("the compressed data is cut short")
        data = d.unused_data
    return b"".join(parts)


def _is_tar(data: bytes) -> bool:
    """A POSIX or GNU tar archive (its magic at offset 257)."""
    return data[257:262] == b"ustar"


def _as_utf8(data: bytes) -> bytes:
    if data.startswith(_UTF8_BOM):
        return data[len(_UTF8_BOM) :]
    if data.startswith(_UTF16_BOMS):
        return data.decode("utf-16", "replace").encode()
    return data


def _is_list_kind(kind: Any) -> bool:
    return isinstance(kind, str) and kind.endswith("List")


def _looks_like_object(value: Obj) -> bool:
    meta = value.get("metadata")
    return "apiVersion" in value or (isinstance(meta, dict) and "name" in meta)


def _at(where: str, item: int | None) -> str:
    return where if item is None else f"{where}, item {item}"


def _type_name(value: Any) -> str:
    kinds = {str: "string", list: "list", int: "number", float: "number", bool: "boolean"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _near(path: Path) -> str:
    """"; did you mean ..." naming siblings of a mistyped path, or nothing."""
    import difflib

    try:
        siblings = [p.name for p in (path.parent if str(path.parent) else Path(".")).iterdir()]
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, siblings, n=3, cutoff=0.5)
    close += [s for s in siblings if path.name and s.startswith(path.name) and s not in close]
    return f"; did you mean {', '.join(str(path.parent / c) for c in close[:3])}?" if close else ""
