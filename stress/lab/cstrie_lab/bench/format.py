"""Number formatting for tables."""

from __future__ import annotations

__all__ = ["fmt_bytes", "fmt_ns", "fmt_ratio", "fmt_size", "parse_size"]


def fmt_ns(ns: float) -> str:
    """Nanoseconds as ``850 ns`` / ``12.3 us`` / ``4.56 ms`` / ``1.23 s``."""
    if ns != ns:  # NaN
        return "n/a"
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.3g} us"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e9:.3g} s"


def fmt_ratio(x: float) -> str:
    return "n/a" if x != x else f"{x:.2f}x"


def fmt_bytes(b: float) -> str:
    if abs(b) < 1024:
        return f"{b:.0f} B"
    if abs(b) < 1024**2:
        return f"{b / 1024:.1f} KiB"
    if abs(b) < 1024**3:
        return f"{b / 1024**2:.1f} MiB"
    return f"{b / 1024**3:.2f} GiB"


def fmt_size(n: int) -> str:
    """1000 -> 1k, 1500000 -> 1.5M (exact thousands/millions only get a suffix)."""
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1_000_000:g}M"
    if n >= 1_000 and n % 100 == 0:
        return f"{n / 1_000:g}k"
    return str(n)


def parse_size(text: str) -> int:
    """``"10000"``, ``"10k"``, ``"1M"``, ``"1.5m"``, ``"100_000"`` -> int (> 0)."""
    t = text.strip().lower().replace("_", "")
    mult = 1
    if t.endswith("k"):
        mult, t = 1_000, t[:-1]
    elif t.endswith("m"):
        mult, t = 1_000_000, t[:-1]
    try:
        value = float(t) * mult
    except ValueError:
        raise ValueError(f"not a size: {text!r} (use e.g. 1000, 10k, 1M)") from None
    n = int(value)
    if n <= 0 or n != value:
        raise ValueError(f"a size must be a positive whole number: {text!r}")
    return n
