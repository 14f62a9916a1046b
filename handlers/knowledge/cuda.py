"""CUDA and driver versions: what an image needs (``cuda.yaml``) and what a node has.

"CUDA driver version is insufficient for CUDA runtime version" says only that the CUDA
runtime found no driver new enough. Whether the node's driver is too old, or the container
never got the driver at all, is decided by ``driver_verdict``: the image's CUDA (env
``CUDA_VERSION`` / ``NVIDIA_REQUIRE_CUDA``, image tag) against the node's driver (GFD
labels, the driver pod's image tag) or the CUDA version the node reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from handlers.knowledge import load_yaml

_DATA = Path(__file__).with_name("cuda.yaml")

Verdict = Literal["too-old", "new-enough", "unknown"]

_REQUIRE = re.compile(r"cuda>=(\d+\.\d+)")
# nvidia/cuda:12.4.1-runtime-ubuntu22.04, pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime,
# vllm/vllm-openai:v0.5.0-cu121 (the tag only, never the registry or repository)
_TAG_PATTERNS = (
    re.compile(r"^(\d{1,2}\.\d)(?:\.\d+)?(?:-|$)"),
    re.compile(r"cuda-?(\d{1,2}\.\d)"),
    re.compile(r"(?:^|[-_.])cu(\d{2})(\d)(?:$|[-_.])"),
)
_DRIVER_TAG = re.compile(r"(?:^|-)(\d{3}\.\d{2,3}(?:\.\d{2,3})?)(?:-|$)")


@dataclass(frozen=True)
class Table:
    toolkit: dict[tuple[int, int], str]  # CUDA release -> its driver
    minor_compat: dict[int, str]  # major -> minimum driver for any minor release
    source: str
    compat_source: str


def version(text: str) -> tuple[int, ...] | None:
    """``"550.54.15"`` -> ``(550, 54, 15)``; None when it is not a version."""
    parts = text.strip().split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _cuda_key(cuda: str) -> tuple[int, int] | None:
    v = version(cuda)
    if not v:
        return None
    return (v[0], v[1] if len(v) > 1 else 0)


@cache
def table() -> Table:
    doc = load_yaml(_DATA)
    toolkit = {}
    for cuda, driver in doc["toolkit"].items():
        key = _cuda_key(str(cuda))
        if key is None or version(str(driver)) is None:
            raise ValueError(f"cuda.yaml: bad toolkit entry {cuda}: {driver}")
        toolkit[key] = str(driver)
    compat = {int(k): str(v) for k, v in doc["minor_compat"].items()}
    return Table(toolkit, compat, str(doc["source"]), str(doc["compat_source"]))


def toolkit_driver(cuda: str) -> str | None:
    """The driver NVIDIA lists for CUDA release ``cuda`` (the nearest earlier release when
    the table lacks that minor)."""
    key = _cuda_key(cuda)
    if key is None:
        return None
    known = [k for k in table().toolkit if k <= key and k[0] == key[0]]
    return table().toolkit[max(known)] if known else None


def min_driver(cuda: str) -> str | None:
    """The oldest driver that runs an image built for ``cuda``: the major release's minor
    version compatibility minimum from CUDA 11 on, the release's own driver before."""
    key = _cuda_key(cuda)
    if key is None:
        return None
    return table().minor_compat.get(key[0]) or toolkit_driver(cuda)


def driver_cuda(driver: str) -> str | None:
    """The newest CUDA release whose listed driver ``driver`` satisfies, e.g. 470.223.02 ->
    11.4."""
    have = version(driver)
    if have is None:
        return None
    ok = [k for k, d in table().toolkit.items() if (version(d) or ()) <= have]
    return "{}.{}".format(*max(ok)) if ok else None


def image_cuda(container: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(cuda, evidence)`` for one container spec: env CUDA_VERSION, NVIDIA_REQUIRE_CUDA,
    or the image tag. None when nothing names it."""
    env = {str(e.get("name")): str(e.get("value", "")) for e in container.get("env") or []
           if isinstance(e, Mapping)}
    if env.get("CUDA_VERSION") and _cuda_key(env["CUDA_VERSION"]):
        return env["CUDA_VERSION"], f"env CUDA_VERSION={env['CUDA_VERSION']}"
    m = _REQUIRE.search(env.get("NVIDIA_REQUIRE_CUDA", ""))
    if m:
        return m.group(1), f"env NVIDIA_REQUIRE_CUDA={env['NVIDIA_REQUIRE_CUDA']}"
    image = str(container.get("image", ""))
    tag = image.rsplit("/", 1)[-1].partition(":")[2].partition("@")[0]
    for i, rx in enumerate(_TAG_PATTERNS):
        if i == 0 and "cuda" not in image.rsplit("/", 1)[-1].partition(":")[0]:
            continue  # a bare version tag names CUDA only on a cuda image
        m = rx.search(tag)
        if m:
            cuda = ".".join(m.groups())
            return cuda, f"image {image}"
    return None


def driver_from_image(image: str) -> str | None:
    """The driver version in a driver container image tag (nvcr.io/nvidia/driver:550.54.15-
    ubuntu22.04)."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    m = _DRIVER_TAG.search(tag)
    return m.group(1) if m else None


def driver_verdict(cuda: str, driver: str | None, node_cuda: str | None) -> Verdict:
    """Is the node's driver (or the CUDA version it reports) new enough for ``cuda``?"""
    need = min_driver(cuda)
    want = _cuda_key(cuda)
    if driver and need and version(driver) and version(need):
        return "new-enough" if (version(driver) or ()) >= (version(need) or ()) else "too-old"
    have = _cuda_key(node_cuda) if node_cuda else None
    if have and want:
        if want[0] >= 11:  # minor version compatibility within a major release
            return "new-enough" if have[0] >= want[0] else "too-old"
        return "new-enough" if have >= want else "too-old"
    return "unknown"


def requirement_text(cuda: str) -> str:
    """What NVIDIA lists for ``cuda``, for evidence and fixes."""
    key = _cuda_key(cuda)
    full, least = toolkit_driver(cuda), min_driver(cuda)
    if key is None or full is None:
        return f"CUDA {cuda}: no driver listed ({table().source})"
    text = f"CUDA {key[0]}.{key[1]} is released with driver >= {full}"
    if least and least != full:
        text += f" and runs on >= {least} (CUDA {key[0]}.x minor version compatibility)"
    return text + f" ({table().source})"
