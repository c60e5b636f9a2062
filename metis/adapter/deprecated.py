"""The adapter's closing verbs of the first engine, kept for one release: ``aclose`` is the one."""

from __future__ import annotations

from metis.core.deprecation import warn_deprecated


class OldClosingNames:
    """``close()`` and ``dispose()``, each warning and then running ``aclose()``."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Deprecated: :meth:`aclose`."""
        warn_deprecated(f"{type(self).__name__}.close()", f"{type(self).__name__}.aclose()")
        await self.aclose()

    async def dispose(self) -> None:
        """Deprecated: :meth:`aclose`."""
        warn_deprecated(f"{type(self).__name__}.dispose()", f"{type(self).__name__}.aclose()")
        await self.aclose()
