"""The typed, versioned payload one task of a run hands to the next (plain JSON on the wire).

``prepare`` hands the tasks after it (throttle, execute, cancel, teardown, report) a
:class:`PreparedPayload`: the :class:`~kafka_reassign.run.prepare.PreparedRun` plus what only
the run knows (placement before, when it started). Every reader goes through
:meth:`PreparedPayload.from_json`, which refuses a payload of another schema version: a
payload written by an earlier (unversioned) or later release fails loudly instead of being
read with the wrong meaning.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from kafka_reassign.cluster.state import ClusterState
from kafka_reassign.errors import ReassignError
from kafka_reassign.execution.steps import StepMove
from kafka_reassign.planning.plan import PartitionMove
from kafka_reassign.run.prepare import PreparedRun

#: The schema this release writes and reads. Raise it whenever a field changes meaning or shape.
PAYLOAD_SCHEMA_VERSION = 1


class PayloadVersionError(ReassignError, ValueError):
    """A payload of a schema version this release does not read (written by another release)."""

    def __init__(self, got: object, reads: int = PAYLOAD_SCHEMA_VERSION) -> None:
        self.got, self.reads = got, reads
        what = "no schema_version (written before payloads were versioned)" if got is None \
            else f"schema_version {got!r}"
        super().__init__(f"the prepared run payload has {what}; this release reads schema_version {reads}: "
                         "prepare the run again with this release")


def check_version(d: Mapping[str, Any]) -> None:
    """Raise :class:`PayloadVersionError` unless ``d`` carries the schema version this release reads."""
    got = d.get("schema_version")
    if type(got) is not int or got != PAYLOAD_SCHEMA_VERSION:
        raise PayloadVersionError(got)


@dataclass(frozen=True)
class PreparedPayload:
    """What prepare hands on: the prepared run and what the run knew when it was prepared.

    :param run: the prepared run (plan, params, steps, throttle changes, cluster id)
    :param before: ``topic-partition`` -> its replicas when prepared (None: the partition did not exist)
    :param started_at: unix time the run took the cluster lock (None for a dry run)
    :param schema_version: the payload's schema (:data:`PAYLOAD_SCHEMA_VERSION`)
    """

    run: PreparedRun
    before: dict[str, list[int] | None] = field(default_factory=dict)
    started_at: float | None = None
    schema_version: int = PAYLOAD_SCHEMA_VERSION

    @classmethod
    def of(cls, run: PreparedRun, state: ClusterState, started_at: float | None = None) -> PreparedPayload:
        """The payload of ``run``, with each planned partition's replicas as ``state`` shows them.

        :param state: the cluster as prepare read it
        :param started_at: when the run took the cluster lock (None for a dry run)
        """
        before: dict[str, list[int] | None] = {}
        for m in run.plan.moves:
            p = state.partition(m.topic, m.partition)
            before[m.name] = list(p.replicas) if p is not None else None
        return cls(run=run, before=before, started_at=started_at)

    @property
    def dry_run(self) -> bool:
        return self.run.params.dry_run

    @property
    def cluster_id(self) -> str | None:
        return self.run.cluster_id

    @property
    def steps(self) -> list[StepMove]:
        return self.run.steps

    @property
    def moves(self) -> list[PartitionMove]:
        return self.run.plan.moves

    @property
    def nothing_to_move(self) -> bool:
        """Every partition of the plan was already at its target when prepared (no step to run)."""
        return not self.run.steps

    def to_json(self) -> dict[str, Any]:
        """One flat JSON object: the run's fields (what the UI reads, e.g. ``estimate``) and the payload's."""
        own = {"schema_version": self.schema_version, "started_at": self.started_at,
               "before": {name: (None if r is None else list(r)) for name, r in self.before.items()}}
        run = self.run.to_json()
        assert not own.keys() & run.keys(), "a PreparedRun field would shadow a payload field"
        return {**run, **own}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str) -> PreparedPayload:
        """Read a payload; :class:`PayloadVersionError` for another schema version or none.

        :param d: the payload as :meth:`to_json` wrote it, or its JSON text
        """
        wire: Mapping[str, Any] = json.loads(d) if isinstance(d, str) else d
        check_version(wire)
        started = wire.get("started_at")
        return cls(run=PreparedRun.from_json(wire),
                   before={str(k): (None if v is None else [int(b) for b in v]) for k, v in wire["before"].items()},
                   started_at=None if started is None else float(started))
