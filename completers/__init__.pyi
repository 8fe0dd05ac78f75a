"""Public names of ``completers`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._cookbook import (
    MessageCompleter as MessageCompleter,
)
from ._cookbook import (
    StopCondition as StopCondition,
)
from ._cookbook import (
    TinkerMessageCompleter as TinkerMessageCompleter,
)
from ._cookbook import (
    TinkerTokenCompleter as TinkerTokenCompleter,
)
from ._cookbook import (
    TokenCompleter as TokenCompleter,
)
from ._cookbook import (
    TokensWithLogprobs as TokensWithLogprobs,
)
from ._scripted import (
    ScriptedGroupCompleter as ScriptedGroupCompleter,
)
from ._scripted import (
    ScriptedMessageCompleter as ScriptedMessageCompleter,
)
from ._scripted import (
    ScriptedReply as ScriptedReply,
)
from ._scripted import (
    ScriptedTokenCompleter as ScriptedTokenCompleter,
)
from ._scripted import (
    ScriptExhaustedError as ScriptExhaustedError,
)
