"""A follower-side quota meter's quick "never crosses" agrees with the break-by-break walk.

seconds_to_cross answers "never" without the walk when a lower bound of the allowance (the
bytes of the last window plus a sample, moving as an aged meter's do) stays above the level
(QuotaMeter._stays_above); every such answer must be the walk's too.
"""
from __future__ import annotations

import math
import random

import pytest

from test_sim_quota_events import MB, _random_history


def _questions(seed: int):
    """(meter, bound, level) after every step of random follower-side meter histories."""
    rng = random.Random(100 + seed)
    for _ in range(150):
        bound = rng.choice([1 * MB, 2 * MB, 5 * MB])
        yield from ((meter, bound, level) for meter, _t in _random_history(rng, aged=False, bound=bound)
                    if meter.t is not None for level in (0.0, -bound / 4))


@pytest.mark.parametrize("seed", range(3))
def test_quick_never_is_the_walks_answer(seed):
    quick = asked = 0
    for meter, bound, level in _questions(seed):
        asked += 1
        if meter._stays_above(bound, level):
            quick += 1
            assert math.isinf(meter._walk_to_cross(bound, level))
    assert quick > 1_000 and quick < asked  # the bound answers often, and not always
