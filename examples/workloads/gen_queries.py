#!/usr/bin/env python3
"""Generates the example's query sets: `gen_queries.py SEED COUNT [MIX]`.

train.queries and holdout.queries were made with different seeds and operator mixes, so the
held-out set is work that training never saw (checked: no query appears in both files).
"""
import random
import sys

seed, count = int(sys.argv[1]), int(sys.argv[2])
mix = sys.argv[3] if len(sys.argv) > 3 else "train"
rng = random.Random(seed)
ARITH = ["+", "-", "*", "/", "%"] if mix == "train" else ["+", "-", "*", "%", "%"]
CMP = ["<", "<=", ">", ">=", "==", "!="]


def col():
    return f"c{rng.randrange(8)}"


def value(depth):
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return col() if rng.random() < 0.7 else str(rng.randrange(1, 50))
    if r < 0.7:
        return f"({value(depth - 1)} {rng.choice(ARITH)} {value(depth - 1)})"
    if r < 0.8:
        return f"abs({value(depth - 1)})"
    if r < 0.9:
        return f"{rng.choice(['min', 'max'])}({value(depth - 1)}, {value(depth - 1)})"
    return f"if({pred(depth - 1)}, {value(depth - 1)}, {value(depth - 1)})"


def pred(depth):
    r = rng.random()
    if depth <= 0 or r < 0.4:
        if rng.random() < 0.2:
            lo = rng.randrange(0, 500)
            return f"{col()} between {lo} and {lo + rng.randrange(1, 5000)}"
        return f"{value(0)} {rng.choice(CMP)} {rng.randrange(0, 1000)}"
    if r < 0.65:
        return f"{pred(depth - 1)} and {pred(depth - 1)}"
    if r < 0.9:
        return f"({pred(depth - 1)} or {pred(depth - 1)})"
    return f"not {pred(depth - 1)}"


for _ in range(count):
    agg = rng.choice(["count", "sum", "sum", "min", "max", "avg"])
    head = "count" if agg == "count" else f"{agg}({value(3)})"
    print(f"{head} where {pred(3)}" if rng.random() < 0.85 else head)
