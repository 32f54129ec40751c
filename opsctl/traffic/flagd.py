"""The experiment gate: the split as an OpenFeature flagd flag, sticky per user.

A per-request weight sends one user to both backends, which contaminates an A/B test of business
metrics. Here the split is a flagd flag definition: one variant per backend, and targeting
`fractional` on the evaluation's targeting key (the user), so each user hashes (murmur3 of the
flag key and the targeting key) to a fixed bucket in [0, total weight) and the buckets are handed
out to the variants in a FIXED order (the configured backends' order), never sorted by weight.
Moving 20/80 to 30/70 therefore moves exactly the buckets [20, 30): the 10% of users that must move.

The change record (opsctl/traffic/record.py) and the version counter travel in the flag's own
`metadata` (flagd allows only strings, numbers and booleans there, so the record is JSON text),
so the split and its record are one write. Other flags in the same definition are kept as they are.
The definition lives in a file (`traffic.flagd.path`, flagd's file sync, written atomically under
a lock) or in a ConfigMap key (`traffic.flagd.configmap`, flagd's Kubernetes / file sync of a
mounted ConfigMap, patched with its resourceVersion). A gate cannot mirror: a split with a shadow
share is refused here (shadow stays with the mesh actuators).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsctl.errors import ConflictError, OpsctlError, UsageError
from opsctl.statefile import locked, write_json_atomic
from opsctl.traffic import record as records
from opsctl.traffic.base import ChangeNotice, StoredSplit, WriteResult
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.traffic.kube import Kube

SCHEMA = "https://flagd.dev/schema/v0/flags.json"
RECORD_KEY = "opsctl.io/traffic-record"
VERSION_KEY = "opsctl.io/version"


def flag_definition(split: Split, backends: list[str], version: int, record: records.ChangeRecord | None) -> dict[str, Any]:
    """The flagd flag for `split`: variants = backends, fractional on the targeting key, in `backends` order."""
    if any(split.shadow_of(b) for b in backends):
        raise UsageError("the flagd experiment gate assigns users, it cannot mirror: set the shadow share on a"
                         " mesh actuator (istio, gateway-api)")
    weights = [[b, split.weight(b)] for b in backends]
    default = max(backends, key=lambda b: (split.weight(b), -backends.index(b)))
    metadata: dict[str, Any] = {VERSION_KEY: version}
    if record is not None:
        metadata[RECORD_KEY] = record.encode()
    return {
        "state": "ENABLED",
        "variants": {b: b for b in backends},
        "defaultVariant": default,
        # the shorthand form buckets by [flag key, targetingKey]: a user's bucket is fixed per flag
        "targeting": {"fractional": weights},
        "metadata": metadata,
    }


def parse_flag(flag: object, backends: list[str], where: str) -> "tuple[Split, int, records.ChangeRecord]":
    """(split, version, record) of a stored flag; UsageError when it is not a gate opsctl can read."""
    if not isinstance(flag, dict):
        raise UsageError(f"{where}: the flag is not a JSON object")
    targeting = flag.get("targeting")
    fractions = targeting.get("fractional") if isinstance(targeting, dict) else None
    if not isinstance(fractions, list) or not fractions:
        raise UsageError(f"{where}: the flag has no `fractional` targeting")
    if not isinstance(fractions[0], list):
        fractions = fractions[1:]  # an explicit bucketing expression first
    weights: dict[str, int] = {}
    for item in fractions:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and type(item[1]) is int):
            raise UsageError(f"{where}: fractional entry {item!r} is not [variant, weight]")
        variants = flag.get("variants") or {}
        backend = variants.get(item[0], item[0]) if isinstance(variants, dict) else item[0]
        weights[str(backend)] = item[1]
    split = Split.from_dict({"weights": weights, "shadow": {}}, backends, where)
    metadata = flag.get("metadata") or {}
    version = metadata.get(VERSION_KEY, 0) if isinstance(metadata, dict) else 0
    try:
        record = records.parse(metadata.get(RECORD_KEY) if isinstance(metadata, dict) else None, where)
    except Exception:  # a damaged record must not block a repair
        record = records.empty()
    return split, version if isinstance(version, int) else 0, record


def _flags(document: object) -> dict[str, Any]:
    if document is None:
        return {}
    if not isinstance(document, dict) or not isinstance(document.get("flags", {}), dict):
        raise UsageError("not a flagd flag definition (a JSON object with `flags`)")
    flags: dict[str, Any] = document.get("flags", {})
    return flags


class FlagdFileActuator:
    """The definition in a JSON file flagd (or the in-process provider) reads."""

    kind = "flagd"

    def __init__(self, path: Path, *, flag: str, default: Split | None, backends: list[str]):
        self.path = Path(path)
        self.flag = flag
        self.default = default
        self.backends = backends
        self.target = f"flagd flag {flag} in {self.path}"

    def _document(self) -> dict[str, Any] | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise OpsctlError(f"{self.path}: cannot read the flag definition: {exc.strerror}") from exc
        try:
            document = json.loads(raw)
        except ValueError:
            raise UsageError(f"{self.path}: the flag definition is not JSON") from None
        _flags(document)
        parsed: dict[str, Any] | None = document  # JSON null or an object: _flags refused anything else
        return parsed

    def _version(self, document: dict[str, Any] | None) -> str:
        flag = _flags(document).get(self.flag)
        if flag is None:
            return "0"
        metadata = flag.get("metadata") if isinstance(flag, dict) else None
        version = metadata.get(VERSION_KEY, 0) if isinstance(metadata, dict) else 0
        return str(version) if isinstance(version, int) else "0"

    def read(self) -> StoredSplit:
        try:
            document = self._document()
        except UsageError as exc:
            return StoredSplit(None, "corrupt", f"corrupt: {exc.message}", record=records.empty(), corrupt=exc.message)
        flag = _flags(document).get(self.flag)
        if flag is None:
            if self.default is None:
                return StoredSplit(None, "0", f"flag {self.flag} not written yet and traffic.default_split is not set",
                                   record=records.empty())
            return StoredSplit(self.default, "0", "not written yet: traffic.default_split", record=records.empty())
        try:
            split, version, record = parse_flag(flag, self.backends, self.target)
        except UsageError as exc:
            return StoredSplit(None, self._version(document), f"corrupt: {exc.message}", record=records.empty(),
                               corrupt=exc.message)
        return StoredSplit(split, str(version), record=record)

    def write(self, split: Split, expected_version: str, *, dry_run: bool, record: records.ChangeRecord | None = None) -> WriteResult:
        with locked(self.path):
            try:
                document = self._document()
            except UsageError:
                document = None  # a corrupt file: an emergency set replaces it
                current = "corrupt"
            else:
                current = self._version(document)
            if current != expected_version:
                raise ConflictError(f"{self.target}: the split changed while this change was planned"
                                    f" (version {expected_version} -> {current})")
            version = int(current) + 1 if current.isdigit() else 1
            if record is None and document is not None:
                old = _flags(document).get(self.flag)
                raw = (old.get("metadata") or {}).get(RECORD_KEY) if isinstance(old, dict) else None
                record = records.parse(raw, self.target) if raw else None
            flag = flag_definition(split, self.backends, version, record)
            if dry_run:
                return WriteResult(current, True, "dry run: nothing written")
            body = dict(document or {})
            body.setdefault("$schema", SCHEMA)
            body["flags"] = {**_flags(document), self.flag: flag}
            write_json_atomic(self.path, body)
        return WriteResult(str(version), False)

    def record_event(self, notice: ChangeNotice) -> str | None:
        return None


class FlagdConfigMapActuator:
    """The definition as JSON in one key of a ConfigMap (mounted for flagd's file sync, or read by
    its Kubernetes sync), patched with the resourceVersion it was planned against."""

    kind = "flagd"

    def __init__(self, kube: "Kube", *, namespace: str, name: str, key: str, flag: str, default: Split | None,
                 backends: list[str]):
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.key = key
        self.flag = flag
        self.default = default
        self.backends = backends
        self.target = f"flagd flag {flag} in ConfigMap {namespace}/{name} key {key}"
        self._ref: dict[str, Any] | None = None
        self._document: dict[str, Any] | None = None

    def read(self) -> StoredSplit:
        cm = self.kube.call(f"read {self.target}", self.kube.core().read_namespaced_config_map, self.name,
                            self.namespace)
        meta = cm.metadata
        self._ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "namespace": meta.namespace,
                     "uid": meta.uid, "resourceVersion": meta.resource_version}
        raw = (cm.data or {}).get(self.key)
        self._document = None
        try:
            document = json.loads(raw) if raw is not None else None
            flag = _flags(document).get(self.flag)
        except (ValueError, UsageError) as exc:
            why = f"the flag definition is not valid: {getattr(exc, 'message', exc)}"
            return StoredSplit(None, meta.resource_version, f"corrupt: {why}", record=records.empty(), corrupt=why)
        self._document = document
        if flag is None:
            return StoredSplit(self.default, meta.resource_version,
                               "not written yet: traffic.default_split" if self.default else
                               f"flag {self.flag} is not set", record=records.empty())
        try:
            split, _, record = parse_flag(flag, self.backends, self.target)
        except UsageError as exc:
            return StoredSplit(None, meta.resource_version, f"corrupt: {exc.message}", record=records.empty(),
                               corrupt=exc.message)
        return StoredSplit(split, meta.resource_version, record=record)

    def write(self, split: Split, expected_version: str, *, dry_run: bool, record: records.ChangeRecord | None = None) -> WriteResult:
        from opsctl.traffic.kube import FIELD_MANAGER, STRATEGIC_MERGE_PATCH

        document = self._document or {}
        old = _flags(document).get(self.flag)
        counter = 0
        if isinstance(old, dict) and isinstance(old.get("metadata"), dict):
            counter = old["metadata"].get(VERSION_KEY, 0) if isinstance(old["metadata"].get(VERSION_KEY), int) else 0
            if record is None and old["metadata"].get(RECORD_KEY):
                record = records.parse(old["metadata"][RECORD_KEY], self.target)
        body = {**document, "flags": {**_flags(document), self.flag: flag_definition(split, self.backends,
                                                                                      counter + 1, record)}}
        body.setdefault("$schema", SCHEMA)
        patch = {"metadata": {"resourceVersion": expected_version},
                 "data": {self.key: json.dumps(body, sort_keys=True)}}
        cm = self.kube.call(
            f"patch {self.target}", self.kube.core().patch_namespaced_config_map, self.name, self.namespace, patch,
            field_manager=FIELD_MANAGER, dry_run="All" if dry_run else None, _content_type=STRATEGIC_MERGE_PATCH,
        )
        version = cm.metadata.resource_version
        if self._ref is not None and not dry_run:
            self._ref = {**self._ref, "resourceVersion": version}
        return WriteResult(version, dry_run, "server dry run (dryRun=All) accepted" if dry_run else "")

    def record_event(self, notice: ChangeNotice) -> str | None:
        if self._ref is None:
            return None
        return self.kube.record_event(involved=self._ref, reason="TrafficSplitChanged",
                                      message=notice.message(self.backends), warning=notice.emergency)
