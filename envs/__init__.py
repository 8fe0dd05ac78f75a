"""TurnGym environments: the token-in/token-out core and the included envs (one folder each)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
