"""USD amounts that print as plain decimals.

:class:`decimal.Decimal` prints an amount under a millionth in scientific notation
(``str(Decimal("0.00000036"))`` is ``3.6E-7``), and pydantic serializes it through ``str``.
:class:`USD` is a Decimal that prints, formats (with no explicit presentation type) and
serializes as ``0.00000036``; it compares and hashes as the Decimal it is, and a sum or
difference of amounts, or an amount scaled by a number, is a :class:`USD` again (so a total a
caller adds up prints as plainly as its parts); a ratio or product of two amounts is a plain
Decimal, being no amount of dollars.
"""

from __future__ import annotations

from decimal import Context, Decimal
from typing import Annotated

from pydantic import AfterValidator

_PRESENTATION_TYPES = frozenset("eEfFgGn%")


class USD(Decimal):
    """A Decimal amount of US dollars whose text is never in scientific notation.

    ``a + b``, ``a - b``, ``-a``, ``abs(a)``, ``sum(amounts)``, ``a * 3`` and ``a / 2`` are
    USD; ``a / b`` and ``a * b`` of two amounts are plain Decimals.
    """

    __slots__ = ()

    def __str__(self) -> str:
        return Decimal.__format__(self, "f")

    def __repr__(self) -> str:
        return f"USD('{self}')"

    def __format__(self, spec: str, context: Context | None = None, /) -> str:
        if not spec or spec[-1] not in _PRESENTATION_TYPES:
            spec += "f"
        if context is None:
            return Decimal.__format__(self, spec)
        return Decimal.__format__(self, spec, context)

    def __add__(self, other: Decimal | int, /) -> USD:
        return _amount(Decimal.__add__(self, other))

    __radd__ = __add__

    def __sub__(self, other: Decimal | int, /) -> USD:
        return _amount(Decimal.__sub__(self, other))

    def __rsub__(self, other: Decimal | int, /) -> USD:
        return _amount(Decimal.__rsub__(self, other))

    def __mul__(self, other: Decimal | int, /) -> Decimal:
        return _scaled(Decimal.__mul__(self, other), other)

    __rmul__ = __mul__

    def __truediv__(self, other: Decimal | int, /) -> Decimal:
        return _scaled(Decimal.__truediv__(self, other), other)

    def __neg__(self) -> USD:
        return USD(Decimal.__neg__(self))

    def __pos__(self) -> USD:
        return USD(Decimal.__pos__(self))

    def __abs__(self) -> USD:
        return USD(Decimal.__abs__(self))


def _amount(result: Decimal) -> USD:
    return result if result is NotImplemented else USD(result)


def _scaled(result: Decimal, other: Decimal | int) -> Decimal:
    if result is NotImplemented or isinstance(other, USD):
        return result
    return USD(result)


def usd(amount: Decimal) -> USD:
    """``amount`` as a :class:`USD` (itself when it is one)."""
    return amount if isinstance(amount, USD) else USD(amount)


USDAmount = Annotated[Decimal, AfterValidator(usd)]
"""A pydantic field type: any Decimal input, kept as a :class:`USD`."""
