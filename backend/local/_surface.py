"""tinker's full client surface on the local clients: what has no local counterpart fails clearly.

A local client names the tinker class it stands in for (``_tinker_class``). Reading a public
attribute the local class lacks but the tinker class has as a method returns a stand-in that
raises :class:`~backend.UnsupportedCallError` when called, naming the call (``hasattr`` stays
true, as on a real client). Any other missing attribute is an ordinary ``AttributeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

from tinker.lib import public_interfaces as _tinker_clients

from ._errors import UnsupportedCallError

# The real classes, captured at import (``backend.offline`` may later replace ``tinker.ServiceClient``).
TINKER_CLASSES: dict[str, type] = {
    name: getattr(_tinker_clients, name)
    for name in ("ServiceClient", "TrainingClient", "SamplingClient", "RestClient")
}


def unsupported(qualname: str) -> UnsupportedCallError:
    """The error for ``tinker.<qualname>`` (e.g. ``"TrainingClient.save_weights_external"``)."""
    return UnsupportedCallError(
        f"tinker.{qualname} is not supported by the local backend (TurnGym's embedded model); "
        "run it against a Tinker service instead"
    )


class TinkerSurface:
    """Mixin: public methods of ``tinker.<_tinker_class>`` missing here raise a clear error."""

    _tinker_class: ClassVar[str]

    def __getattr__(self, name: str) -> Callable[..., NoReturn]:
        if name.startswith("_"):
            raise AttributeError(name)
        real = TINKER_CLASSES.get(type(self)._tinker_class)
        if real is None or not callable(getattr(real, name, None)):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        qualname = f"{type(self)._tinker_class}.{name}"

        def call(*args: Any, **kwargs: Any) -> NoReturn:
            raise unsupported(qualname)

        call.__name__ = name
        call.__qualname__ = qualname
        return call
