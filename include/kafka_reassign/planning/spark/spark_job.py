"""spark-submit entry point of the planner.

Submitted by the DAG through the Spark provider's ``SparkSubmitOperator`` (connection
``spark_default``: its master is whatever that connection says), or by hand::

    spark-submit --master local[2] include/kafka_reassign/planning/spark/spark_job.py \\
        --snapshot snap.json --goal rebalance --out /tmp/plan.json

Same arguments as ``kafka-reassign plan``. Under spark-submit the session already exists (its
master and configs come from spark-submit) and is reused; run directly with python, a small
local session is started. Prints the summary as one JSON line; exit status 0 / 2 / 1 like the CLI.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, get the Spark session, run the planner CLI logic."""
    # make `import kafka_reassign` work when spark-submit runs this file from a checkout
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    include = os.path.dirname(os.path.dirname(here))
    if include not in sys.path:
        sys.path.insert(0, include)

    from kafka_reassign.planning.spark import command as cli
    from kafka_reassign.planning.spark.spark_session import get_spark

    parser = argparse.ArgumentParser(prog="spark_job.py", description="Kafka reassignment planner (Spark)")
    cli.add_arguments(parser)
    args = parser.parse_args(argv)
    spark = None
    if args.engine == "spark":
        size = os.path.getsize(args.snapshot) if os.path.exists(args.snapshot) else None
        spark = get_spark(args.spark_master, app_name=f"kafka-reassign-plan-{args.goal}", input_bytes=size)
    try:
        return cli.run(args, spark=spark)
    finally:
        if spark is not None:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
