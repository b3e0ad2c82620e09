"""``make demo``: the narrated end-to-end run (not part of the domain package: it drives Airflow)."""
from kafka_reassign_demo.scenario import demo_plan, load_scenario

__all__ = ["demo_plan", "load_scenario"]
