"""Other frameworks' environments as TurnGym ``ChatEnv`` s (token-in/token-out, checked prefix).

Each adapter is its own module and imports its framework only when used:

- :mod:`envs.interop.textarena`: TextArena games (ids ``textarena:<GameId>``), single-player ones
  as ``ChatEnv`` s, multi-player ones through the multi-seat form (:mod:`envs.seats`);
  :mod:`envs.interop.textarena_train` trains on one.
- :mod:`envs.interop.openenv`: OpenEnv env servers (ids ``openenv:<server url>``);
  :mod:`envs.interop.openenv_demo` is a small native OpenEnv env to serve. The reverse, any
  TurnGym env as an OpenEnv server, is :mod:`envs.serve`.
- :mod:`envs.interop.verifiers`: verifiers 0.4 environments (ids ``verifiers:<name>``);
  :mod:`envs.interop.verifiers_examples` builds two in code.
"""
