"""Kafka's reassignment JSON, both ways.

The format is the one ``kafka-reassign-partitions.sh --execute --reassignment-json-file``
reads, which Cruise Control and topicmappr also produce::

    {"version": 1,
     "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 2, 3],
                     "log_dirs": ["any", "/d2", "any"]}]}

An entry may also carry ``"original_replicas"``: the replicas the plan was computed from
(the snapshot's placement). Validation compares it with the live cluster before the first
write and refuses a stale plan; Kafka's own tool ignores the field.

Reading is tolerant of extra fields (other tools add ``"reason"`` or ``"size"``) and strict
about types: a replica id ``"4"`` or ``4.0`` is refused, because silently coercing ids is how
a typo moves a partition to the wrong broker. Every problem found is reported, each naming
its entry as ``partitions[3] (orders-7)``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quote
from pathlib import Path
from typing import Any, Iterable

from kafka_reassign.errors import PlanError, Problem
from kafka_reassign.cluster.snapshot import ANY_LOG_DIR
from kafka_reassign.cluster.snapshot import is_int as _is_int


class TopicPartitionName:
    """Mixin for records with ``topic`` and ``partition``: their ``orders-7`` name and key."""

    topic: str
    partition: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class PartitionMove(TopicPartitionName):
    """Target placement of one partition.

    :param topic: topic name
    :param partition: partition index
    :param replicas: target replicas, preferred leader first
    :param log_dirs: per replica an absolute log dir or ``"any"``; None = no preference
    :param original_replicas: the replicas the plan was made from (optional, for the drift check)
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None
    original_replicas: tuple[int, ...] | None = None

    def wanted_dirs(self) -> dict[int, str]:
        """Broker -> requested log dir, only for replicas that ask for a specific dir."""
        if not self.log_dirs:
            return {}
        return {b: d for b, d in zip(self.replicas, self.log_dirs) if d != ANY_LOG_DIR}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topic": self.topic, "partition": self.partition,
                               "replicas": list(self.replicas)}
        if self.log_dirs is not None:
            out["log_dirs"] = list(self.log_dirs)
        if self.original_replicas is not None:
            out["original_replicas"] = list(self.original_replicas)
        return out


@dataclass
class ReassignmentPlan:
    """An ordered list of partition moves (Kafka reassignment JSON, version 1)."""

    moves: list[PartitionMove]
    #: the plan file's text being made ahead (:meth:`make_text_ahead`) and the moves it is of
    _text_ahead: Any = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.moves)

    def __iter__(self):
        return iter(self.moves)

    def by_partition(self) -> dict[tuple[str, int], PartitionMove]:
        return {m.key: m for m in self.moves}

    @property
    def topics(self) -> list[str]:
        return sorted({m.topic for m in self.moves})

    # -- JSON -------------------------------------------------------------------------
    @classmethod
    def from_json(cls, obj: dict[str, Any] | str | bytes) -> "ReassignmentPlan":
        """Parse a reassignment JSON document or object.

        :param obj: the parsed object, or its JSON text
        :raises PlanError: listing every structural problem, each naming its entry
        """
        if isinstance(obj, (str, bytes)):
            obj, _ = decode_plan_text(obj)
        moves, problems = parse_plan_object(obj)
        if problems:
            raise PlanError(problems)
        return cls(moves)

    def to_json(self) -> dict[str, Any]:
        """The plan as Kafka's reassignment JSON object (``log_dirs`` only where given)."""
        return {"version": 1, "partitions": [m.to_json() for m in self.moves]}

    def dumps(self, indent: int | None = None) -> str:
        if indent == 2:  # the plan file's layout, written without json's pure-Python indenting
            ahead, self._text_ahead = self._text_ahead, None
            if ahead is not None and ahead[1] == (id(self.moves), len(self.moves)):
                return str(ahead[0].result())
            if ahead is not None:
                ahead[0].cancel()
            return _indented(self.moves)
        return json.dumps(self.to_json(), indent=indent)

    def make_text_ahead(self) -> None:
        """Start making the plan file's text (for :meth:`dump`) in a forked child that takes only
        the CPU this process leaves idle, when the plan is big enough to split work over processes
        (3M replicas: 2.2 s of one core, made while the estimate's last steps leave a core idle)."""
        from kafka_reassign.planning.forked import Forked, processes_for

        self.discard_text_ahead()
        if processes_for(len(self.moves)) > 1:
            self._text_ahead = (Forked(True, _indented, self.moves, nice=19), (id(self.moves), len(self.moves)))

    def discard_text_ahead(self) -> None:
        """Stop making the text ahead (the plan will not be written)."""
        ahead, self._text_ahead = self._text_ahead, None
        if ahead is not None:
            ahead[0].cancel()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "ReassignmentPlan":
        """Read a plan file.

        :param path: file written by this tool, kafka-reassign-partitions.sh, Cruise Control...
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise PlanError(Problem(str(path), f"cannot read plan file: {exc.strerror or exc}",
                                    "unreadable")) from None
        return cls.from_json(text)

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Write the plan atomically (temp file + rename) so a reader never sees half a file."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(self.dumps(indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


_ITEM = "\n        "  # a list element inside a plan entry


def _items(values: Any, fmt: Any) -> str:
    return "[" + _ITEM + f",{_ITEM}".join(map(fmt, values)) + "\n      ]" if values else "[]"


def _entry(m: PartitionMove) -> str:
    """One entry of ``json.dumps(plan.to_json(), indent=2)``, the same text (ids are ints)."""
    text = (f'    {{\n      "topic": {_quote(m.topic)},\n      "partition": {int(m.partition)},'
            f'\n      "replicas": {_items(m.replicas, int.__repr__)}')
    if m.log_dirs is not None:
        text += f',\n      "log_dirs": {_items(m.log_dirs, _quote)}'
    if m.original_replicas is not None:
        text += f',\n      "original_replicas": {_items(m.original_replicas, int.__repr__)}'
    return text + "\n    }"


def _indented(moves: list[PartitionMove]) -> str:
    """``json.dumps(to_json(), indent=2)`` made by string joins: json's indenting encoder is pure
    Python (about 13 s for the 605,865 entries of a 3M-replica plan, this about 1.5 s)."""
    if not moves:
        return '{\n  "version": 1,\n  "partitions": []\n}'
    return '{\n  "version": 1,\n  "partitions": [\n' + ",\n".join(map(_entry, moves)) + "\n  ]\n}"


#: Headings of ``kafka-reassign-partitions.sh --generate``'s output, in the order it prints them.
GENERATE_CURRENT = "Current partition replica assignment"
GENERATE_PROPOSED = "Proposed partition reassignment configuration"


def _json_after(text: str, heading: str, source: str) -> Any:
    """The JSON value that follows ``heading`` in ``text``."""
    start = text.find("{", text.index(heading) + len(heading))
    if start < 0:
        raise PlanError(Problem(source, f"no JSON after {heading!r}", "not_json"))
    try:
        return json.JSONDecoder().raw_decode(text, start)[0]
    except json.JSONDecodeError as exc:
        raise PlanError(Problem(source, f"the JSON after {heading!r} is not valid: {exc}", "not_json")) from None


def decode_plan_text(text: str | bytes, source: str = "plan") -> tuple[Any, Any | None]:
    """Decode a plan file: Kafka's reassignment JSON, or the two-part output of
    ``kafka-reassign-partitions.sh --generate`` (current assignment, then proposed plan).

    :param text: the file's content
    :param source: what to name in errors (the file name)
    :returns: (the plan, decoded but not checked; the "current" part or None)
    :raises PlanError: when it is neither
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if GENERATE_PROPOSED in text:
        current = _json_after(text, GENERATE_CURRENT, source) if GENERATE_CURRENT in text else None
        return _json_after(text, GENERATE_PROPOSED, source), current
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        raise PlanError(Problem(source, f"not valid JSON ({exc}) and not the output of "
                                        "kafka-reassign-partitions.sh --generate", "not_json")) from None


def assignment_drift(current: Any, state: Any) -> list[str]:
    """Partitions whose replicas differ from the "current" part of a --generate output.

    :param current: that part, decoded (a reassignment JSON object)
    :param state: the cluster now (a :class:`~kafka_reassign.cluster.state.ClusterState`)
    :returns: one ``orders-3: [1, 2, 3] then, [1, 2, 4] now`` line per partition that changed
    """
    moves, _ = parse_plan_object(current)
    out = []
    for m in moves:
        now = state.partition(m.topic, m.partition)
        if now is not None and tuple(now.replicas) != tuple(m.replicas):
            out.append(f"{m.name}: {list(m.replicas)} then, {list(now.replicas)} now")
    return out


def _entry_name(i: int, entry: Any) -> str:
    if isinstance(entry, dict):
        t, p = entry.get("topic"), entry.get("partition")
        if isinstance(t, str) and _is_int(p):
            return f"partitions[{i}] ({t}-{p})"
        if isinstance(t, str):
            return f"partitions[{i}] ({t})"
    return f"partitions[{i}]"


def parse_plan_object(obj: Any) -> tuple[list[PartitionMove], list[Problem]]:
    """Parse without raising: returns the moves that parsed and every problem found.

    :param obj: the decoded JSON value
    """
    entries, problems = parse_plan_entries(obj)
    return [m for _, m in entries], problems


def parse_plan_entries(obj: Any) -> tuple[list[tuple[int, PartitionMove]], list[Problem]]:
    """Like :func:`parse_plan_object` but keeps each move's index in ``partitions``.

    Validation (:mod:`kafka_reassign.planning.plan_checks`) uses this to report structural
    problems together with cluster problems, naming entries by their position in the file.

    :param obj: the decoded JSON value
    """
    problems: list[Problem] = []
    if not isinstance(obj, dict):
        return [], [Problem("plan", f"must be a JSON object, got {type(obj).__name__}", "not_object")]
    version = obj.get("version")
    if not _is_int(version) or version != 1:
        problems.append(Problem("version", f"must be 1 (Kafka reassignment format), got {version!r}",
                                "bad_version"))
    parts = obj.get("partitions")
    if not isinstance(parts, list):
        problems.append(Problem("partitions", "missing or not a list", "bad_partitions"))
        return [], problems
    moves: list[tuple[int, PartitionMove]] = []
    for i, entry in enumerate(parts):
        move = _parse_entry(_entry_name(i, entry), entry, problems)
        if move is not None:
            moves.append((i, move))
    return moves, problems


def _parse_entry(name: str, entry: Any, problems: list[Problem]) -> PartitionMove | None:
    """One ``partitions`` entry as a move, or None when it has a problem (each added to ``problems``)."""
    if not isinstance(entry, dict):
        problems.append(Problem(name, f"must be an object, got {type(entry).__name__}", "bad_entry"))
        return None
    found_before = len(problems)
    topic: Any = entry.get("topic")  # decoded JSON: checked below
    if not isinstance(topic, str) or not topic:
        problems.append(Problem(name, f"topic must be a non-empty string, got {topic!r}", "bad_topic"))
    part: Any = entry.get("partition")
    if not _is_int(part):
        problems.append(Problem(name, f"partition must be an integer, got {part!r}", "bad_partition_id"))
    elif part < 0:
        problems.append(Problem(name, f"partition must be >= 0, got {part}", "bad_partition_id"))
    replicas: Any = entry.get("replicas")
    problems.extend(_replica_problems(name, replicas))
    log_dirs: Any = entry.get("log_dirs")
    problems.extend(_log_dir_problems(name, log_dirs))
    original: Any = entry.get("original_replicas")
    if original is not None and (not isinstance(original, list) or not original
                                 or not all(_is_int(r) and r >= 0 for r in original)):
        problems.append(Problem(name, "original_replicas must be a non-empty list of broker ids (the "
                                      f"placement the plan was made from), got {original!r}",
                                "bad_original_replicas"))
    if len(problems) > found_before:
        return None
    return PartitionMove(topic=topic, partition=part, replicas=tuple(replicas),
                         log_dirs=tuple(log_dirs) if log_dirs is not None else None,
                         original_replicas=tuple(original) if original is not None else None)


def _replica_problems(name: str, replicas: Any) -> list[Problem]:
    """``replicas`` must be a list of broker ids (ints >= 0, never ``"4"`` or ``4.0``)."""
    if not isinstance(replicas, list):
        return [Problem(name, f"replicas must be a list of broker ids, got {replicas!r}", "bad_replicas")]
    problems = []
    for j, r in enumerate(replicas):
        if not _is_int(r):
            problems.append(Problem(name, f"replicas[{j}] must be an integer broker id, got {r!r}",
                                    "bad_broker_id"))
        elif r < 0:
            problems.append(Problem(name, f"replicas[{j}] must be >= 0, got {r}", "bad_broker_id"))
    return problems


def _log_dir_problems(name: str, log_dirs: Any) -> list[Problem]:
    """``log_dirs``, when given, must be a list of ``"any"`` or absolute paths."""
    if log_dirs is None:
        return []
    if not isinstance(log_dirs, list) or not all(isinstance(d, str) and d for d in log_dirs):
        return [Problem(name, "log_dirs must be a list of non-empty strings ('any' or an absolute path), "
                              f"got {log_dirs!r}", "bad_log_dirs")]
    return [Problem(name, f"log_dirs[{j}] must be 'any' or an absolute path, got {d!r}", "bad_log_dirs")
            for j, d in enumerate(log_dirs) if d != ANY_LOG_DIR and not d.startswith("/")]


def plan_from_moves(moves: Iterable[PartitionMove]) -> ReassignmentPlan:
    """Convenience: a plan from moves (keeps their order)."""
    return ReassignmentPlan(list(moves))
