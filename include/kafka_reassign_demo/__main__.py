"""``python -m kafka_reassign_demo``."""
from __future__ import annotations

import sys

from kafka_reassign_demo.demo import main

sys.exit(main())
