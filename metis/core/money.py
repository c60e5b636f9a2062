"""USD amounts that print as plain decimals.

:class:`decimal.Decimal` prints an amount under a millionth in scientific notation
(``str(Decimal("0.00000036"))`` is ``3.6E-7``), and pydantic serializes it through ``str``.
:class:`USD` is a Decimal that prints, formats (with no explicit presentation type) and
serializes as ``0.00000036``; it compares, hashes and computes as the Decimal it is.
"""

from __future__ import annotations

from decimal import Context, Decimal
from typing import Annotated

from pydantic import AfterValidator

_PRESENTATION_TYPES = frozenset("eEfFgGn%")


class USD(Decimal):
    """A Decimal amount of US dollars whose text is never in scientific notation.

    Arithmetic gives plain Decimals, as for any Decimal subclass: wrap a sum in ``USD(...)``.
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


def usd(amount: Decimal) -> USD:
    """``amount`` as a :class:`USD` (itself when it is one)."""
    return amount if isinstance(amount, USD) else USD(amount)


USDAmount = Annotated[Decimal, AfterValidator(usd)]
"""A pydantic field type: any Decimal input, kept as a :class:`USD`."""
