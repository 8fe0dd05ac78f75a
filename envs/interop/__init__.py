"""Other frameworks' environments as TurnGym ``ChatEnv`` s (token-in/token-out, checked prefix).

Each adapter is its own module and imports its framework only when used:

- :mod:`envs.interop.textarena`: TextArena single-player games (ids ``textarena:<GameId>``).
"""
