"""Leader-aware sourcing: which replica sends each partition's copies, and the steps that make it lead."""
from __future__ import annotations

import sys
from pathlib import Path

from kafka_reassign.execution.sourcing import choose_sources, with_lead_steps
from kafka_reassign.execution.steps import PartitionMove, plan_all_steps
from kafka_reassign.planning.bounds import throttle_bound
from kafka_reassign.planning.estimate import Limits, estimate_run, step_loads
from kafka_reassign.planning.plan_estimate import planned_state
from kafka_reassign.planning.leadership import senders

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_bounds import MB, decommission_moves  # noqa: E402


def decommission():
    moves = decommission_moves()
    state = planned_state(moves)
    steps = plan_all_steps([PartitionMove(m.topic, m.partition, tuple(m.target)) for m in moves], state)
    return moves, state, steps


def test_sources_spread_the_leaving_brokers_sends_and_keep_leaders_on_ties():
    moves, state, steps = decommission()
    sources = choose_sources(steps, state)
    # Broker 8 leads 7 of the 21: without sourcing it sends 7 copies, while the busiest receiver
    # (broker 1) takes 4. Sourcing spreads the sends as evenly as the in-sync replicas allow: 21
    # copies over 8 senders is at least 3 for one of them.
    sent: dict[int, int] = {}
    received: dict[int, int] = {}
    for m in moves:
        b = sources.get((m.topic, m.partition), m.leader)
        sent[b] = sent.get(b, 0) + 1
        for r in set(m.target) - set(m.current):
            received[r] = received.get(r, 0) + 1
    assert max(received.values()) == 4 and max(sent.values()) == 3, (sent, received)
    assert all(state.partition(*k).leader != b for k, b in sources.items())  # only real changes listed
    assert all(b in state.partition(*k).isr for k, b in sources.items())


def test_lead_steps_reorder_then_the_copy_follows_from_the_new_leader():
    _, state, steps = decommission()
    sources = choose_sources(steps, state)
    led = with_lead_steps(steps, sources)
    assert len(led) == len(steps) + len(sources)
    by_key: dict = {}
    for s in led:
        by_key.setdefault(s.key, []).append(s)
    for key, src in sources.items():
        lead, copy, *_ = by_key[key]
        assert lead.is_leader_only and lead.target[0] == src and set(lead.target) == set(lead.current)
        assert copy.current == lead.target and copy.adding
        assert [s.step_index for s in by_key[key]] == list(range(len(by_key[key])))
        assert {s.step_count for s in by_key[key]} == {len(by_key[key])}
        assert by_key[key][-1].target == steps[[s.key for s in steps].index(key)].target  # plan order at the end
    # Who sends each step: the source once its lead step ran.
    sent = senders(led, {k: state.partition(*k).leader for k in by_key})
    for s, b in zip(led, sent):
        if s.key in sources and s.adding:
            assert b == sources[s.key]


def test_sourcing_lowers_the_fixed_leader_bound_and_the_estimate_to_the_source_free_one():
    _, state, steps = decommission()
    led = with_lead_steps(steps, choose_sources(steps, state))
    limits = Limits(rate=10 * MB)
    before, after = estimate_run(steps, state, limits), estimate_run(led, state, limits)
    fixed_before = throttle_bound(step_loads(steps, state), limits).seconds
    fixed_after = throttle_bound(step_loads(led, state), limits).seconds
    assert fixed_before == before.bound_seconds and fixed_after == after.bound_seconds
    assert after.source_free_seconds is not None
    assert fixed_after <= 1.05 * after.source_free_seconds < 0.8 * fixed_before
    assert after.seconds < 0.8 * before.seconds


def test_no_sourcing_under_min_isr_or_with_an_offline_replica():
    from dataclasses import replace

    _, state, steps = decommission()
    key = next(iter(choose_sources(steps, state)))
    p = state.partition(*key)
    shrunk = replace(p, isr=(p.leader,))  # one in-sync replica: below min ISR 2 and nobody else to send
    topics = {**state.topics, key[0]: replace(state.topics[key[0]],
                                              partitions={**state.topics[key[0]].partitions, key[1]: shrunk})}
    assert key not in choose_sources(steps, replace(state, topics=topics))
    # Two in sync but min.insync.replicas 3: under min ISR, no election there.
    two = replace(p, isr=p.replicas[:2])
    strict = {**state.topics, key[0]: replace(state.topics[key[0]], configs={"min.insync.replicas": "3"},
                                              partitions={**state.topics[key[0]].partitions, key[1]: two})}
    assert key not in choose_sources(steps, replace(state, topics=strict))
    offline = replace(p, offline=(p.replicas[-1],))
    gone = {**state.topics, key[0]: replace(state.topics[key[0]],
                                            partitions={**state.topics[key[0]].partitions, key[1]: offline})}
    assert key not in choose_sources(steps, replace(state, topics=gone))


def test_augmenting_paths_reach_the_receivers_pace_where_a_greedy_pass_does_not():
    """The real-cluster layout (tests/real_kafka/test_real_sourcing.py): broker 6 leaves, leading 4 of 10,
    and each of brokers 1-5 receives 2. A first-come greedy left broker 3 sending 4."""
    import itertools

    from kafka_reassign.planning.plan_estimate import PlannedMove

    receiver = (5, 4, 3, 2, 1, 3, 4, 5, 1, 2)
    moves, received = [], {b: 0 for b in range(1, 6)}
    for p, (a, b) in enumerate(itertools.combinations(range(1, 6), 2)):
        now = [(6, a, b), (a, 6, b), (a, b, 6)][p % 3]
        new = receiver[p]
        received[new] += 1
        moves.append(PlannedMove(topic="t", partition=p, current=now, target=tuple(new if r == 6 else r for r in now),
                                 size_bytes=6 * MB, leader=now[0]))
    state = planned_state(moves)
    steps = plan_all_steps([PartitionMove(m.topic, m.partition, tuple(m.target)) for m in moves], state)
    sources = choose_sources(steps, state)
    sent: dict[int, int] = {}
    for m in moves:
        b = sources.get((m.topic, m.partition), m.leader)
        sent[b] = sent.get(b, 0) + 1
    assert max(received.values()) == 2 and max(sent.values()) == 2, sent
