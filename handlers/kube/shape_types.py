"""The shape tables of shape.py as msgspec types: what a snapshot keeps of an object.

The tables list every field handlers read of the kinds that make up the bulk of a
snapshot (PROJECTED). A snapshot's JSON list of such a kind is decoded straight into
those fields (msgspec, in C): the rest of each object (probes, managedFields, IPs, DNS
settings) is skipped unread and never reaches memory. The same types, applied to an
object already in memory (``project``), cut it down alike, so a snapshot object holds
the same fields whether it came from JSON, YAML or the careful path. Within one list, the
subtrees replicas carry alike (SHARED: containers, tolerations, labels...) are decoded
once per distinct text and shared, so a snapshot's objects must only be read.

Two families, from the same tables:

- ``strict`` (decoding): at least as strict as ``misfit()`` at every field. Quantities
  must be spelled the common way and stay far below the range limit, numbers fit int64,
  names and messages keep their length limits, and only NULLABLE timestamps may be null.
  A document that decodes therefore holds only objects that fit; a document that does
  not goes the careful way, where ``misfit()`` names the field.
- ``lax`` (projecting): the types alone, for objects ``misfit()`` has already passed.
"""

from __future__ import annotations

import re
import threading
from typing import Annotated, Any, Optional, TypedDict, Union

import msgspec

from handlers.kube import shape as s

# The kinds that make up the bulk of a large snapshot, whose tables list all that handlers
# read of them (tests/test_snapshot_decode.py: every scenario gives the same findings
# with and without). Other kinds are kept whole: ReplicaSets and Deployments too, whose
# pod templates are compared whole between revisions (handlers/rollout.py).
PROJECTED = frozenset({"Pod", "Node", "Event"})

# Quantity spellings the strict family takes: digits with a suffix, the mantissa short
# enough for its suffix that the value stays below 1.2e18 (misfit's limit is 2**63,
# ~9.2e18). Anything else ("1e3", "+1", ".5", "8Ei") is read the careful way.
QUANTITY = re.compile(
    r"\A(?:\d{1,15}(?:\.\d{0,9})?(?:[num]|k|Ki)?|\d{1,12}(?:\.\d{0,9})?(?:M|Mi)"
    r"|\d{1,9}(?:\.\d{0,9})?(?:G|Gi)|\d{1,6}(?:\.\d{0,9})?(?:T|Ti)"
    r"|\d{1,3}(?:\.\d{0,9})?(?:P|Pi))\Z"
)
# Timestamps kubectl prints as null ("lastProbeTime": null on every pod condition,
# "eventTime": null on every core/v1 Event). Decoded as None, then dropped by the
# loader's timestamp pass, which reads each of them (tests/test_snapshot_decode.py
# proves it visits every place these keys have in the tables); misfit() drops them on
# the careful way. A null in any other field fails decoding: the careful way again.
NULLABLE = frozenset({
    "creationTimestamp", "lastTransitionTime", "lastHeartbeatTime", "lastProbeTime",
    "startTime", "startedAt", "finishedAt", "lastTimestamp", "firstTimestamp", "eventTime",
    "deprecatedLastTimestamp", "deprecatedFirstTimestamp", "lastObservedTime",
})
_INT64 = msgspec.Meta(ge=-(2**63), le=2**63 - 1)
_STRICT_QUANTITY = Union[  # noqa: UP007 (msgspec reads typing unions)
    Annotated[str, msgspec.Meta(pattern=QUANTITY.pattern)],
    Annotated[int, _INT64],
    Annotated[float, msgspec.Meta(ge=-s.MAX_NUMBER, le=s.MAX_NUMBER)],
]
_LAX_QUANTITY = Union[str, int, float]  # noqa: UP007
_SCALAR = Union[str, int, float, bool, None]  # noqa: UP007
# Anything but null, which misfit() removes from every listed field, unchecked or not.
_SOMETHING = Union[dict[str, Any], list[Any], str, int, float, bool]  # noqa: UP007

_LEAVES: dict[bool, dict[Any, Any]] = {
    True: {
        s._any: _SOMETHING, s._str: str, s._bool: bool, s._any_scalar: _SCALAR,
        s._quantity: _STRICT_QUANTITY,
        s._name: Annotated[str, msgspec.Meta(min_length=1, max_length=s.MAX_NAME)],
        s._int: Annotated[int, _INT64],
    },
    False: {
        s._any: Any, s._str: str, s._bool: bool, s._any_scalar: _SCALAR,
        s._quantity: _LAX_QUANTITY,
        s._name: str, s._int: int,
    },
}
_CUT = Annotated[str, msgspec.Meta(max_length=s.MAX_TEXT)]


class _Types:
    """The TypedDicts of one family, made when a kind is first read."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.made: dict[Any, Any] = {}
        self.count = 0

    def of(self, check: Any) -> Any:
        made = self.made.get(check)
        if made is None:
            made = self.made[check] = self._make(check)
        return made

    def _make(self, check: Any) -> Any:
        leaf = _LEAVES[self.strict].get(check)
        if leaf is not None:
            return leaf
        if check is s._quantities:
            return dict[str, _LEAVES[self.strict][s._quantity]]  # type: ignore[misc]
        tag, *rest = s._SHAPES[check]
        if tag == "list":
            return list[self.of(rest[0])]  # type: ignore[misc]
        if tag == "map":
            return dict[str, self.of(rest[0])]  # type: ignore[misc]
        spec, cut = rest
        return self.mapping(spec, cut)

    def mapping(self, spec: dict[str, Any], cut: tuple[str, ...] = ()) -> Any:
        """A TypedDict of ``spec``'s keys, each optional; keys not listed are skipped.
        Strict: only NULLABLE keys may be null."""
        self.count += 1
        fields: dict[str, Any] = {}
        for key, check in spec.items():
            typ = _CUT if self.strict and key in cut and check is s._str else self.of(check)
            fields[key] = Union[typ, None] if self.strict and key in NULLABLE else typ  # noqa: UP007
        return _typed_dict(f"Shape{self.count}", fields)

    def kind(self, kind: str) -> Any:
        """An object of ``kind``: its table, with ``kind`` and ``apiVersion``."""
        key = ("kind", kind)
        made = self.made.get(key)
        if made is None:
            _tag, spec, cut = s._SHAPES[s._BY_KIND[kind]]
            made = self.made[key] = self.mapping(
                {"kind": s._str, "apiVersion": s._str, **spec}, cut)
        return made


def _typed_dict(name: str, fields: dict[str, Any]) -> Any:
    return TypedDict(name, fields, total=False)  # type: ignore[operator]


_STRICT = _Types(strict=True)
_LAX = _Types(strict=False)
_DECODERS: dict[str, ListDecoder] = {}
_LOCK = threading.Lock()

# Subtrees that the replicas of one controller carry alike, byte for byte: decoded once per
# distinct JSON text in a list and that one value shared by every object that has it, as
# the watch cache shares them (bot/live/lean.py; snapshot objects are only read too). In
# the 30,000 pods of bench/'s dump, 10,000 texts stand for 240,000 subtrees: decoding
# builds a third of the memory and takes half the time.
SHARED: dict[str, dict[str, tuple[str, ...]]] = {
    "Pod": {"spec": ("containers", "initContainers", "tolerations", "affinity", "nodeSelector"),
            "metadata": ("labels", "annotations", "ownerReferences")},
}


class ListDecoder:
    """Decodes a JSON list of one kind (``{"kind": "PodList", "items": [...]}`` or
    ``kind: List``), strict: raises msgspec.MsgspecError unless every item fits. Items hold
    only the fields in the tables; their SHARED subtrees are one value per distinct text."""

    def __init__(self, kind: str) -> None:
        item = _STRICT.kind(kind)
        # (part, ((key, the decoder of its value), ...)): the item's type reads these
        # subtrees as msgspec.Raw, the text they were written as.
        self._shared: list[tuple[str, tuple[tuple[str, msgspec.json.Decoder[Any]], ...]]] = []
        parts = dict(item.__annotations__)
        for part, keys in SHARED.get(kind, {}).items():
            fields = dict(parts[part].__annotations__)
            decoders = tuple((k, msgspec.json.Decoder(fields[k])) for k in keys if k in fields)
            for key, _ in decoders:
                fields[key] = msgspec.Raw
            parts[part] = _typed_dict(f"{kind}{part.title()}Raw", fields)
            self._shared.append((part, decoders))
        items: Any = Optional[list[_typed_dict(f"{kind}Raw", parts)]]  # type: ignore[misc]  # noqa: UP045
        doc = _typed_dict(f"{kind}ListShape", {"kind": str, "apiVersion": Optional[str],  # noqa: UP045
                                               "items": items})
        self._list: msgspec.json.Decoder[Any] = msgspec.json.Decoder(doc)

    def decode(self, data: bytes) -> Any:
        doc = self._list.decode(data)
        if self._shared and doc.get("items"):
            self._decode_shared(doc["items"])
        return doc

    def _decode_shared(self, items: list[dict[str, Any]]) -> None:
        # One memo per field: a text can be valid as one field's type and not another's.
        memos: dict[str, dict[bytes, Any]] = {
            key: {} for _, decoders in self._shared for key, _ in decoders}
        for item in items:
            for part, decoders in self._shared:
                sub = item.get(part)
                if sub is None:
                    continue
                for key, decoder in decoders:
                    raw = sub.get(key)
                    if raw is None:
                        continue
                    memo = memos[key]
                    text = bytes(raw)
                    value = memo.get(text)
                    if value is None:
                        value = memo[text] = decoder.decode(text)
                    sub[key] = value


def list_decoder(kind: str) -> ListDecoder:
    """The decoder of a JSON list of ``kind`` (ListDecoder), made on first use."""
    with _LOCK:
        decoder = _DECODERS.get(kind)
        if decoder is None:
            decoder = _DECODERS[kind] = ListDecoder(kind)
        return decoder


def project(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (of a kind in PROJECTED, passed by ``misfit()``) cut down to the fields
    handlers read: a new dict, ``obj`` is left as it was."""
    with _LOCK:
        typ = _LAX.kind(obj["kind"])
    projected: dict[str, Any] = msgspec.convert(obj, typ)
    return projected
