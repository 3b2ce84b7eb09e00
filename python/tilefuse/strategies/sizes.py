"""Power-of-two rounding that the strategies' heuristics share."""


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, n - 1).bit_length()


def pow2_at_most(n: int) -> int:
    """The largest power of two <= n (1 for n <= 1)."""
    return 1 << (max(1, n).bit_length() - 1)
