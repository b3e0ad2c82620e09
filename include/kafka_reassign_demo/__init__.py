"""``make demo``: the narrated end-to-end run (not part of the domain package: it drives Airflow)."""
