"""The driver-side goals, one module each, every one a
:class:`~kafka_reassign.planning.spark.assignor.ReplicaAssignor` (so a user can load them by dotted
path like their own class). The balancing goals run on Spark: :mod:`kafka_reassign.planning.spark.flow`."""
from __future__ import annotations

from kafka_reassign.planning.spark.goals.base import BuiltinGoal
from kafka_reassign.planning.spark.goals.disk_threshold import DiskThreshold
from kafka_reassign.planning.spark.goals.disks import Disks
from kafka_reassign.planning.spark.goals.rack_repair import RackRepair
from kafka_reassign.planning.spark.goals.replication_factor import ReplicationFactor

__all__ = ["BuiltinGoal", "DiskThreshold", "Disks", "RackRepair", "ReplicationFactor", "GOALS"]

GOALS: dict[str, type[BuiltinGoal]] = {"replication-factor": ReplicationFactor, "rack-repair": RackRepair,
                                       "disks": Disks, "disk-threshold": DiskThreshold}
