"""``kafka-reassign cordon`` and ``uncordon`` (KIP-1066, Kafka 4.3+).

``cordon`` records each broker's ``cordoned.log.dirs`` (and where a value it inherits comes
from) in ``--record-dir`` before writing; ``uncordon`` puts that value back exactly. Every
refusal (unknown broker or dir, only in-sync replicas on the brokers, an older cluster) comes
before any write, with exit code 2.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_reassign.cli.connection import BadInput, admin_from_args
from kafka_reassign.throttle.record import FileRecordStore

if TYPE_CHECKING:
    from kafka_reassign.throttle.restore import RestoreResult

EXIT_OK, EXIT_FAILED = 0, 1


def _store(record_dir: str, must_exist: bool) -> FileRecordStore:
    if must_exist and not Path(record_dir).is_dir():
        raise BadInput(f"--record-dir {record_dir} is not a directory")
    return FileRecordStore(record_dir)


def cmd_cordon(args: argparse.Namespace) -> int:
    from kafka_reassign.throttle.cordon import cordon_brokers
    store = _store(args.record_dir, must_exist=False)
    with admin_from_args(args) as admin:
        state = admin.cluster_state()
        result = cordon_brokers(admin, store, state, args.brokers, args.log_dirs, by="kafka-reassign cordon",
                                allow_sole_isr=args.allow_sole_isr)
    for line in result.lines():
        print(line)
    print(f"cordoned broker(s) {', '.join(map(str, args.brokers))}: Kafka places no new replica on "
          f"{'their log dirs ' + ', '.join(args.log_dirs) if args.log_dirs else 'them'}; "
          f"`kafka-reassign uncordon --brokers {','.join(map(str, args.brokers))} --record-dir {args.record_dir}` "
          "puts back the prior values")
    return EXIT_FAILED if result.not_read_back else EXIT_OK


def cmd_uncordon(args: argparse.Namespace) -> int:
    from kafka_reassign.throttle.cordon import uncordon_brokers
    store = _store(args.record_dir, must_exist=True)
    with admin_from_args(args) as admin:
        results = uncordon_brokers(admin, store, args.brokers)
    left = sum(print_restore(f"{record_id}: {len(res.changes)} config write(s)", res)
               for record_id, res in results.items())
    return EXIT_FAILED if left else EXIT_OK


def print_restore(headline: str, res: RestoreResult) -> int:
    """Print a restore's writes, warnings and what is left; return how many resources are left."""
    print(headline)
    for c in res.changes:
        print(f"  {c.describe()}")
    for w in res.warnings:
        print(f"  warning: {w}")
    for what, why in sorted(res.pending.items()):
        print(f"  PENDING {what}: {why}")
    return len(res.pending)
