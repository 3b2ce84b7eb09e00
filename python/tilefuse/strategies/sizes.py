"""Divisors, power-of-two rounding and row packing that the strategies'
heuristics share."""

import math


def largest_divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of n that is <= limit (1 if none is larger)."""
    best = 1
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            for c in (d, n // d):
                if c <= limit:
                    best = max(best, c)
    return best


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, n - 1).bit_length()


def pow2_at_most(n: int) -> int:
    """The largest power of two <= n (1 for n <= 1)."""
    return 1 << (max(1, n).bit_length() - 1)


def packed_rows(
    rows: int, threads: int, subgroup_size: int, want: int, row_bytes: int, target
) -> int:
    """R rows per workgroup when a row takes a single subgroup (XLA packs
    short rows likewise): one subgroup-sized workgroup per row caps occupancy
    (32 one-warp blocks per SM on CUDA) and makes many tiny workgroups. R is
    the largest power of two with R*T <= `want` (and the target's thread
    limit) that divides the row count (every workgroup gets full rows) and
    whose rows' `row_bytes` each fit in workgroup memory; 1 when a row spans
    several subgroups."""
    if threads != subgroup_size:
        return 1
    r = pow2_at_most(max(1, min(want, target.max_threads) // threads))
    while r > 1 and (rows % r or r * row_bytes > target.shared_memory_bytes):
        r //= 2
    return r
