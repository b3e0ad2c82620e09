"""The balance goals by name in a priority order (planning/goal_order.py): the list reaches the
planner from the options, the CLI, the run parameters and the fleet; bad lists are refused with
one line naming the problem before Spark starts, and nothing is written."""
from __future__ import annotations

import json

import pytest

from kafka_reassign import defaults
from kafka_reassign.errors import GoalError, ParamError
from kafka_reassign.fleet import FleetChecks, FleetConfigError, parse_fleet
from kafka_reassign.planning.goal_order import BALANCE_GOALS, DEFAULT_BALANCE_GOALS, order_problems, resources_over
from kafka_reassign.planning.spark import command as planner_cli
from kafka_reassign.planning.spark import PlanOptions, make_options, plan
from kafka_reassign.planning.validate import validate_params
from test_planner_inputs import tiny

OK = FleetChecks(lambda conn: True, lambda schedule: None, lambda conn: None)


@pytest.mark.parametrize("names, needle", [
    (["rack-aware", "disk", "cpu"], "unknown goal 'cpu': the known goals are rack-aware, capacity, network-capacity, "
                                    "replica-capacity, disk, network-in, topic-spread, leader-count"),
    (["disk", "rack-aware"], "distribution goal 'disk' is above hard goal 'rack-aware': hard goals come first"),
    (["capacity", "disk", "leader-count", "disk"], "goal 'disk' is listed more than once"),
    (["rack-aware", "network-in"], "keep 'disk' in the list"),
])
def test_bad_lists_are_one_line_each_naming_the_problem(names: list[str], needle: str) -> None:
    problems = order_problems(names)
    assert len(problems) == 1 and "\n" not in str(problems[0])
    assert needle in str(problems[0]) and problems[0].entry == "balance_goals"
    with pytest.raises(GoalError, match="balance_goals: "):
        make_options("rebalance", balance_goals=names)
    with pytest.raises(ParamError, match="balance_goals: "):
        validate_params({"balance_goals": names})


def test_the_default_list_is_every_goal_and_the_list_sets_the_switches() -> None:
    opts = make_options("rebalance")
    assert opts.balance_goals == DEFAULT_BALANCE_GOALS == validate_params({}).balance_goals
    assert DEFAULT_BALANCE_GOALS == tuple(g.name for g in BALANCE_GOALS) and not order_problems(DEFAULT_BALANCE_GOALS)
    assert all(getattr(opts, g.switch) for g in BALANCE_GOALS if g.switch)
    # a PlanOptions made directly has the switches the default list sets
    assert all(getattr(PlanOptions(), g.switch) for g in BALANCE_GOALS if g.switch)
    opts = make_options("rebalance", balance_goals="capacity,disk,leader-bytes-in,leader-count")
    assert opts.balance_goals == ("capacity", "disk", "leader-bytes-in", "leader-count")
    assert (opts.balance_network_in, opts.balance_leaders, opts.balance_leader_bytes_in) == (False, True, True)
    # a switch given by name (as before the list) drops its goal or adds it last
    assert "network-in" not in make_options("rebalance", balance_network_in=False).balance_goals
    assert make_options("rebalance", balance_goals="disk", balance_leader_bytes_in=True).balance_goals == (
        "disk", "leader-bytes-in")
    assert "leader-bytes-in" not in make_options("rebalance", balance_leader_bytes_in=False).balance_goals
    # hard goals need not be listed (they are rules every plan keeps); plan kinds that move no data
    # through the search may leave disk out
    assert make_options("rebalance", balance_goals=["disk"]).balance_leaders is False
    assert make_options("rack-repair", balance_goals=["leader-count"]).balance_goals == ("leader-count",)


def test_topic_spread_is_on_by_default_and_left_out_turns_it_off() -> None:
    assert "topic-spread" in DEFAULT_BALANCE_GOALS
    assert make_options("rebalance").balance_topic_spread is True
    opts = make_options("rebalance", balance_goals="disk,network-in,leader-count")
    assert (opts.balance_topic_spread, opts.balance_network_in, opts.balance_leaders) == (False, True, True)
    assert make_options("rebalance", balance_goals="disk", balance_topic_spread=True).balance_goals[-1] == "topic-spread"
    with pytest.raises(GoalError, match="'topic-spread' is above hard goal 'capacity'"):
        make_options("rebalance", balance_goals="topic-spread,capacity,disk")
    # its figure is an excess count, not max / mean: the threshold never reads it
    assert resources_over({"disk": {"before": 1.0}}, ("disk", "topic-spread"), 1.10) == {}


def test_cli_flag_repeats_and_reaches_the_planner_flags() -> None:
    flags = defaults.planner_flags({"balance_goals": ["disk", "leader-bytes-in"]})
    assert flags == ["--balance-goal", "disk", "--balance-goal", "leader-bytes-in"]
    parser = planner_cli.argparse.ArgumentParser()
    planner_cli.add_arguments(parser)
    args = parser.parse_args(["--snapshot", "s", "--goal", "rebalance", "--out", "o", *flags])
    assert planner_cli.options_from_args(args)["balance_goals"] == ["disk", "leader-bytes-in"]
    plain = parser.parse_args(["--snapshot", "s", "--goal", "rebalance", "--out", "o"])
    assert "balance_goals" not in planner_cli.options_from_args(plain)  # the default list applies


def test_cli_refuses_a_bad_list_before_spark_starts_and_writes_nothing(tmp_path, capsys, monkeypatch) -> None:
    from kafka_reassign.planning.spark import spark_session

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark must not start for a bad goal list")

    monkeypatch.setattr(spark_session, "get_spark", no_spark)
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(tiny()))
    out = tmp_path / "PLAN.json"
    rc = planner_cli.main(["--snapshot", str(snap), "--goal", "rebalance", "--out", str(out),
                           "--balance-goal", "disk", "--balance-goal", "rack-aware"])
    assert rc == planner_cli.EXIT_BAD_INPUT
    assert "distribution goal 'disk' is above hard goal 'rack-aware'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [snap]


def test_capacity_below_the_load_with_no_way_out_is_refused_and_nothing_written(tmp_path, capsys) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(tiny()))  # 9 GB on 600 GB: 1.5%
    out = tmp_path / "PLAN.json"
    rc = planner_cli.main(["--snapshot", str(snap), "--goal", "rebalance", "--out", str(out), "--engine", "local",
                           "--capacity-ceiling", "0.01"])
    assert rc == planner_cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "the data needs 1.5% of the placeable brokers' capacity, above capacity_ceiling=1%" in err
    assert list(tmp_path.iterdir()) == [snap]


def test_fleet_entry_chooses_its_goals_and_bad_ones_are_named() -> None:
    [entry] = parse_fleet(json.dumps([{"conn_id": "k1", "balance_goals": ["disk", "leader-bytes-in"]}]), OK)
    assert entry.balance_goals == ("disk", "leader-bytes-in")
    with pytest.raises(FleetConfigError, match=r"fleet entry 1 \(k1\): balance_goals: unknown goal 'cpu'"):
        parse_fleet(json.dumps([{"conn_id": "k1", "balance_goals": ["disk", "cpu"]}]), OK)


def test_the_threshold_acts_on_any_listed_resource_above_it() -> None:
    balance = {"disk": {"before": 1.02}, "network_in": {"before": 1.30}, "leaders": {"before": 1.05},
               "leader_bytes_in": {"before": 2.5}}
    assert resources_over(balance, DEFAULT_BALANCE_GOALS, 1.10) == {"network-in": 1.30, "leader-bytes-in": 2.5}
    assert resources_over(balance, ("disk", "network-in", "leader-count"), 1.10) == {"network-in": 1.30}
    assert resources_over(balance, ("disk", "leader-bytes-in"), 1.10) == {"leader-bytes-in": 2.5}
    assert resources_over(balance, ("rack-aware", "disk", "leader-count"), 1.10) == {}


def test_network_in_above_disk_is_bound_by_the_capacity_ceiling_only() -> None:
    from test_planner_goals import check_common
    from test_planner_network import hot_snapshot

    snap = hot_snapshot(7)
    tight = {"engine": "local", "network_in_tolerance": 0.03}
    below = plan(snap, "rebalance", balance_goals="disk,network-in", **tight).summary["balance"]
    above_res = plan(snap, "rebalance", balance_goals="network-in,disk", **tight)
    check_common(snap, above_res, goal="rebalance")  # rules and the capacity ceiling still hold
    above = above_res.summary["balance"]
    assert above["network_in"]["after"] < below["network_in"]["after"]
    assert below["disk"]["after"] <= 1.04 < above["disk"]["after"]  # disk gave way to the higher goal


def test_a_dag_trigger_with_a_bad_list_is_refused_before_the_run_is_created() -> None:
    from kafka_reassign_airflow.conf_check import conf_problems
    from kafka_reassign_airflow.params import reassign_params

    dag_defaults = {name: param.value for name, param in reassign_params().items()}
    conf = {"goal": "rebalance", "balance_goals": ["leader-count", "capacity", "disk"]}
    assert conf_problems("kafka_reassign", dag_defaults, conf) == [
        "balance_goals: distribution goal 'leader-count' is above hard goal 'capacity': hard goals come first "
        "(as in Cruise Control)"]
    assert conf_problems("kafka_reassign", dag_defaults, {"goal": "rebalance", "balance_goals": ["disk"]}) == []


def test_a_broken_capacity_rule_the_plan_improves_triggers_the_scheduled_rebalance() -> None:
    from kafka_reassign.planning.goal_order import capacities_over

    summary = {"network_capacity": {"brokers_with_link": 3, "ceiling": 0.8, "in": {"before": 1.2, "after": 0.8},
                                    "out": {"before": 0.7, "after": 0.6}},
               "replica_capacity": {"max_replicas_per_broker": 100, "fullest_before": 130, "fullest_after": 100}}
    assert capacities_over(summary) == {"network-capacity (in)": 1.2, "replica-capacity": 130.0}
    stuck = {"network_capacity": {"ceiling": 0.8, "in": {"before": 1.2, "after": 1.2}},
             "replica_capacity": {"max_replicas_per_broker": None, "fullest_before": 130, "fullest_after": 90}}
    assert capacities_over(stuck) == {}  # no plan improves it, or no cap: nothing to act on
    assert capacities_over({"network_capacity": {"brokers_with_link": 0, "ceiling": 0.8}}) == {}
