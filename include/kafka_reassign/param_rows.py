"""The shape of a row of :data:`kafka_reassign.defaults.RUN_PARAMS`: a run parameter and where it shows.

Kept apart from the table so that the table module holds the rows and what is derived from them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

#: A run parameter's value as JSON carries it.
ParamValue = Union[int, float, bool, str, None, tuple[str, ...]]


@dataclass(frozen=True)
class CliFlag:
    """How a run parameter shows on the command line.

    :param flag: the option, e.g. ``--throttle`` (for a boolean: the switch that flips the default)
    :param metavar: shown in ``--help``
    :param execute_only: only ``execute`` takes it (``validate`` and ``rehearse`` never write)
    :param off_flag: a second switch that sets the value to None (``--no-throttle``)
    :param off_help: that switch's help
    :param snapshot_only: only ``snapshot`` takes it (an input of the planner, not of a run)
    """

    flag: str
    metavar: str | None = None
    execute_only: bool = False
    snapshot_only: bool = False
    off_flag: str | None = None
    off_help: str = ""


@dataclass(frozen=True)
class DagField:
    """How a run parameter shows as a DAG param (the trigger form).

    :param title: the form's label
    :param section: the form's group (:data:`WHAT`, :data:`HOW`, :data:`SAFETY`)
    :param description: the form's help
    :param name: the param's name when it differs from the domain's
    :param per_domain_unit: DAG value = domain value / this (minutes shown for seconds: 60)
    :param refuse_null: the DAG refuses None although the domain takes it (no unthrottled DAG run)
    """

    title: str
    section: str
    description: str
    name: str | None = None
    per_domain_unit: float = 1.0
    refuse_null: bool = False


@dataclass(frozen=True)
class RunParam:
    """One run parameter.

    :param name: the domain name (a :class:`~kafka_reassign.planning.validate.ReassignParams` field)
    :param kind: int, float, bool, str, or tuple (a list of strings: the CLI flag repeats)
    :param default: the default value
    :param help: one line, for ``--help`` and the docstrings
    :param minimum: smallest accepted value (numbers)
    :param exclusive_minimum: the minimum itself is refused (``> 0`` rather than ``>= 0``)
    :param maximum: largest accepted value (ints)
    :param nullable: None is accepted (and means what ``help`` says)
    :param unit: ``bytes/s``, ``s``, ``min`` or "" (a count, a switch, a name)
    :param choices: names a str parameter takes, alone or as a comma list
    :param cli: the CLI flag, None = not on the command line
    :param dag: the DAG param, None = not a DAG param
    :param planner: the planner takes it too (time estimate, warnings)
    :param readme: the README defaults table's label, None = not in that table
    :param readme_note: after the table's flag and param names
    :param old_name: a former name still accepted (for one release) as an alias
    """

    name: str
    kind: type
    default: ParamValue
    help: str
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: int | None = None
    nullable: bool = False
    unit: str = ""
    choices: tuple[str, ...] = ()
    cli: CliFlag | None = None
    dag: DagField | None = None
    planner: bool = False
    readme: str | None = None
    readme_note: str = ""
    old_name: str | None = None

    @property
    def dag_name(self) -> str:
        return (self.dag.name if self.dag else None) or self.name
