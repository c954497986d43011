"""Plain-integer statement of requantization, independent of approxmul_cffi.quant.

Each step is written as the rounding it is meant to be (exact rationals,
Python integers), not as the bit tricks the library uses (nudges, masks,
shifts of negative numbers), so an error in those tricks shows up as a
difference. Covers both roundings of docs/quantization.md, left shifts
(factors >= 1, up to 2^29) and int32 saturation before and after them.
"""

from fractions import Fraction
import math

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


def sat32(v):
    return max(INT32_MIN, min(INT32_MAX, v))


def round_half_up(q):
    """Nearest integer to a rational, ties toward +infinity."""
    return math.floor(q + Fraction(1, 2))


def round_half_away(q):
    """Nearest integer to a rational, ties away from zero."""
    return round_half_up(q) if q >= 0 else -round_half_up(-q)


def scale(x, mantissa, shift, rounding):
    """x * mantissa * 2^(shift - 31), rounded as ``rounding`` says; x already int32."""
    if rounding == "single":
        # one rounding of the exact product
        return round_half_up(Fraction(x * mantissa) * Fraction(2) ** (shift - 31))
    if rounding != "double":
        raise ValueError(rounding)
    # gemmlowp: the left shift saturates to int32, the doubling high multiply
    # rounds x*m/2^31 with ties up, the division by 2^right rounds ties away
    x = sat32(x * 2 ** max(shift, 0))
    high = round_half_up(Fraction(x * mantissa, 2**31))
    return round_half_away(Fraction(high, 2 ** max(-shift, 0)))


def requantize_value(acc, bias, mantissa, shift, zero_point, qmin, qmax, rounding="double"):
    """One output code: clamp(zero_point + scale(sat32(acc + bias)), qmin, qmax)."""
    y = scale(sat32(int(acc) + int(bias)), int(mantissa), int(shift), rounding)
    return max(int(qmin), min(int(qmax), int(zero_point) + y))


def requantize(acc, bias, mantissa, shift, zero_point, qmin, qmax, rounding="double"):
    """Nested lists in, nested lists out: acc [outer][channels][...]; bias,
    mantissa, shift scalars or one per channel (axis 1)."""
    def per_channel(v, c):
        return v[c] if isinstance(v, (list, tuple)) else v

    out = []
    for block in acc:
        rows = []
        for c, values in enumerate(block):
            args = (per_channel(bias, c), per_channel(mantissa, c), per_channel(shift, c))

            def one(v, args=args):
                if isinstance(v, list):
                    return [one(u) for u in v]
                return requantize_value(v, *args, zero_point, qmin, qmax, rounding)
            rows.append(one(values))
        out.append(rows)
    return out
