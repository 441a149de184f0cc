"""What every timing bench needs to be believed: each round runs every variant once in a fresh
random order (drawn from a seed the result records), after a warm-up round that is not kept;
the figure is the median of the per-round paired ratios, with a distribution-free interval
of that median whose coverage is exact whatever the noise: the order-statistic interval
(the sign test inverted), at least `level`."""
import math
import random
import statistics

MIN_ROUNDS = 7


def orders(seed, rounds, names):
    """The order the variants run in, round by round: a fresh random permutation each."""
    rng = random.Random(seed)
    for _ in range(rounds):
        order = list(names)
        rng.shuffle(order)
        yield order


def _binomial_cdf(k, n):
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_interval(values, level=0.95):
    """The order-statistic interval of the median: [x(k), x(n+1-k)] with the largest k whose
    exact coverage, 1 - 2 P(Bin(n, 1/2) <= k - 1), is at least `level`. Returns (low, high,
    coverage); (None, None, None) with fewer values than any such interval needs."""
    xs = sorted(values)
    n = len(xs)
    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * _binomial_cdf(k - 1, n)
        if coverage >= level:
            best = (xs[k - 1], xs[n - k], coverage)
    return best if best else (None, None, None)


def summary(ratios, level=0.95):
    """The median of paired ratios, its interval, and how it was made."""
    low, high, coverage = median_interval(ratios, level)
    return {
        "rounds": len(ratios),
        "median_ratio": statistics.median(ratios) if ratios else None,
        "interval": [low, high],
        "interval_coverage": coverage,
        "interval_method": "order statistics of the median of the per-round ratios (the sign "
                           "test inverted): distribution-free, exact coverage as given",
        "ratios": ratios,
    }
