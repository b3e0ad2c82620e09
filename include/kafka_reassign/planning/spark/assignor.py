"""The pluggable replica assignor (after the pluggable replica assignor KIP).

The KIP lets an operator plug custom placement logic into Kafka: given the cluster and the
partitions that need a placement, return an assignment, or fail with a clear
``ReplicaAssignorException``. Here the same idea drives reassignment planning: every built-in
goal (:mod:`kafka_reassign.planning.spark.goals`) is a :class:`ReplicaAssignor`, and a user can pass
the dotted path of their own class (``--assignor mycompany.placement:ZoneAware``).

Contract of :meth:`ReplicaAssignor.assign`:

* ``cluster`` is the validated snapshot (:class:`~kafka_reassign.planning.spark.cluster.Cluster`:
  brokers with racks and log dirs, partitions with replicas, sizes and produce rates);
* ``partitions`` are the partitions the assignor may place (excluded topics are left out;
  a replica on an excluded broker must stay where it is);
* it returns ``{(topic, partition): [broker, ...]}`` or ``{(topic, partition): Proposal}``
  (replicas plus log dirs) for the partitions it wants to change; partitions it leaves out
  stay where they are;
* it raises :class:`AssignorError` (or any exception, which the planner wraps into one
  naming the class) when no assignment can be made.

``self.context`` (a :class:`PlanContext`) carries the options and the working assignment with
its load counters. Assignors run on the driver (see :mod:`kafka_reassign.planning.spark.driver_plan`).
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from kafka_reassign import defaults as D
from kafka_reassign.errors import AssignorError
from kafka_reassign.planning.goal_order import DEFAULT_BALANCE_GOALS

if TYPE_CHECKING:  # pragma: no cover
    from kafka_reassign.planning.spark.cluster import Assignment, Cluster, Partition


@dataclass(frozen=True)
class Proposal:
    """A target placement for one partition.

    :param replicas: brokers, preferred leader first
    :param log_dirs: per replica an absolute log dir or ``"any"``; None = no preference
    """

    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None


@dataclass
class PlanOptions:
    """Everything a goal can be told. Defaults are the ones `kafka-reassign plan` uses.

    :param brokers: brokers to fill (add-brokers) or drain (remove-brokers)
    :param replication_factor: target RF (replication-factor goal)
    :param topics: topics the replication-factor goal applies to (empty = all movable topics)
    :param exclude_topics: topics never touched
    :param exclude_brokers: brokers that neither gain nor lose a replica
    :param capacity_ceiling: hard cap on broker and log-dir utilisation after the plan
    :param network_capacity_ceiling: hard cap on a broker's network in and out as a fraction of
        its link (goal network-capacity; brokers whose link speed is known)
    :param broker_network_capacity_bytes_per_sec: every broker's link speed where neither the
        snapshot (``brokers[].network_bytes_per_sec``) nor ``broker_network_capacities`` gives
        one (the run parameter); None: those brokers have no network limit
    :param broker_network_capacities: ``BROKER=RATE`` entries, brokers whose link differs
    :param max_replicas_per_broker: no broker is pushed above this many replicas (goal
        replica-capacity; None: no cap)
    :param balance_tolerance: a broker may end this much above the mean utilisation
    :param count_tolerance: replica-count tolerance around the mean (rebalance)
    :param leader_tolerance: preferred-leader-count tolerance around the mean (rebalance)
    :param balance_network_in: balancing goals also even out network in (produce received as
        leader or follower) after the disk balance, when the snapshot has produce rates
    :param network_in_tolerance: a broker's network in may end this much above the mean
    :param leader_bytes_in_tolerance: a broker's leader bytes in (produce it leads) may end this
        much above the mean (goal leader-bytes-in)
    :param consumer_fanout: consumer groups reading each partition, for network out (the
        ``consumer_fanout`` run param: a broker sends what it leads to its followers and this many times
        to consumers)
    :param network_out_tolerance: a broker's network out may end this much above the mean (goal
        network-out, switch ``balance_network_out``)
    :param balance_goals: the balance goals by name, highest priority first
        (:mod:`~kafka_reassign.planning.goal_order`); the switches above follow from it
    :param topic_spread_slack: replicas of one topic per broker allowed above the even share
        (goal topic-spread, switch ``balance_topic_spread``)
    :param throttle_bytes_per_sec: replication throttle for the time estimate (None = NIC speed)
    :param timeout_seconds: the planning Spark jobs are cancelled after this long (an error
        names this option)
    :param disk_threshold_percent: the disk-threshold goal's X: every log dir ends at most
        this percentage of its capacity
    :param max_task_replicas: most candidate replicas one search task (one rack) may hold; above
        it the plan stops with an error naming this option and the Spark memory settings
    :param search_piece_replicas: candidate replicas per search task: racks are cut into pieces
        of about this many (None = :data:`pieces.PIECE_REPLICAS`); lower it for more parallel tasks
    """

    goal: str = "rebalance"
    brokers: tuple[int, ...] = ()
    replication_factor: int | None = None
    topics: tuple[str, ...] = ()
    exclude_topics: tuple[str, ...] = ()
    exclude_brokers: tuple[int, ...] = ()
    capacity_ceiling: float = 0.85
    network_capacity_ceiling: float = 0.80
    broker_network_capacity_bytes_per_sec: float | None = None
    broker_network_capacities: tuple[str, ...] = ()
    max_replicas_per_broker: int | None = None
    balance_tolerance: float = 0.04
    count_tolerance: float = 0.10
    leader_tolerance: float = 0.10
    network_in_tolerance: float = 0.10
    topic_spread_slack: int = 1
    balance_counts: bool = True
    balance_leaders: bool = True
    balance_topic_spread: bool = True
    balance_network_in: bool = True
    throttle_bytes_per_sec: float | None = None
    log_dir_throttle_bytes_per_sec: float | None = None
    balance_leader_bytes_in: bool = True
    leader_bytes_in_tolerance: float = 0.10
    balance_network_out: bool = True
    network_out_tolerance: float = 0.10
    consumer_fanout: float = D.CONSUMER_FANOUT
    balance_goals: tuple[str, ...] = DEFAULT_BALANCE_GOALS
    max_partition_movements: int = D.MAX_PARTITION_MOVEMENTS
    max_movements_per_broker: int = D.MAX_MOVEMENTS_PER_BROKER
    max_leader_movements: int = D.MAX_LEADER_MOVEMENTS
    assignor: str | None = None
    engine: str = "spark"
    spark_master: str | None = None
    timeout_seconds: float = 900.0
    max_task_replicas: int = 2_000_000
    search_piece_replicas: int | None = None
    disk_threshold_percent: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class PlanContext:
    """What an assignor gets besides the cluster and the partitions.

    :param options: the plan options
    :param assignment: a working copy of the placement with load counters (the built-in goals
        edit it; user assignors may read it)
    :param warnings: assignors append operator-facing warnings here
    """

    options: PlanOptions
    assignment: "Assignment"
    warnings: list[str] = field(default_factory=list)
    lower_bound_bytes: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


class ReplicaAssignor(ABC):
    """Interface every assignor implements (built-in goals and users' classes).

    Subclasses must have a constructor without required arguments.
    """

    #: may the assignor change the number of replicas of a partition
    changes_replication_factor: bool = False

    def __init__(self) -> None:
        self.context: PlanContext | None = None

    def configure(self, context: PlanContext) -> None:
        """Receive options and the planning context before :meth:`assign` is called."""
        self.context = context

    @abstractmethod
    def assign(self, cluster: "Cluster", partitions: Sequence["Partition"]
               ) -> Mapping[tuple[str, int], Sequence[int] | Proposal]:
        """Return target replicas for the partitions to change.

        :param cluster: the validated snapshot
        :param partitions: the partitions this assignor may place
        :raises AssignorError: when no assignment can be made
        """

    def lower_bound_bytes(self, cluster: "Cluster") -> float | None:
        """Bytes any plan reaching this assignor's goal must move (None = unknown)."""
        return None


def assignor_name(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def load_assignor(path: str) -> ReplicaAssignor:
    """Import and instantiate the user's assignor class.

    :param path: ``package.module.Class`` or ``package.module:Class``
    :raises AssignorError: naming the class and what is wrong (import, missing class, wrong type,
        constructor failure)
    """
    if not isinstance(path, str) or not path.strip():
        raise AssignorError(repr(path), "the assignor must be given as a dotted path "
                                        "'package.module.ClassName'")
    path = path.strip()
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise AssignorError(path, "expected a dotted path 'package.module.ClassName'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, but also errors raised while the module runs
        raise AssignorError(path, f"cannot import module {module_name!r}: "
                                  f"{type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AssignorError(path, f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(obj, type):
        raise AssignorError(path, f"{attr!r} is a {type(obj).__name__}, not a class")
    if not issubclass(obj, ReplicaAssignor):
        if not callable(getattr(obj, "assign", None)):
            raise AssignorError(path, "the class neither subclasses "
                                      "kafka_reassign.planning.spark.assignor.ReplicaAssignor nor has an "
                                      "assign(cluster, partitions) method")
    missing = sorted(getattr(obj, "__abstractmethods__", ()) or ())
    if missing:
        raise AssignorError(path, f"the class does not implement {', '.join(missing)}(cluster, partitions)")
    try:
        instance = obj()
    except Exception as exc:
        raise AssignorError(path, f"constructor failed: {type(exc).__name__}: {exc}") from exc
    if not hasattr(instance, "configure"):
        # duck-typed classes get the default configure so they can read the context
        instance.configure = lambda ctx, _i=instance: setattr(_i, "context", ctx)
    return instance
