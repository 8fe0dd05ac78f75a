"""Public names of ``envs.testing`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._conform import (
    WELL_FORMED_TEXTS as WELL_FORMED_TEXTS,
)
from ._conform import (
    ActionKind as ActionKind,
)
from ._conform import (
    CheckName as CheckName,
)
from ._conform import (
    ConformanceReport as ConformanceReport,
)
from ._conform import (
    Outcome as Outcome,
)
from ._conform import (
    ScriptedAnswerer as ScriptedAnswerer,
)
from ._conform import (
    assert_env_conforms as assert_env_conforms,
)
from ._conform import (
    assistant_messages as assistant_messages,
)
from ._conform import (
    conversations as conversations,
)
from ._conform import (
    cookbook_twenty_questions as cookbook_twenty_questions,
)
from ._conform import (
    env_actions as env_actions,
)
from ._conform import (
    env_limits as env_limits,
)
from ._conform import (
    fault_policies as fault_policies,
)
from ._conform import (
    json_values as json_values,
)
from ._conform import (
    messages as messages,
)
from ._conform import (
    render_action as render_action,
)
from ._conform import (
    scripted_policy as scripted_policy,
)
from ._conform import (
    texts as texts,
)
from ._conform import (
    thinking_contents as thinking_contents,
)
from ._conform import (
    token_actions as token_actions,
)
from ._conform import (
    tool_call as tool_call,
)
from ._conform import (
    tool_call_messages as tool_call_messages,
)
from ._conform import (
    well_formed_action as well_formed_action,
)
from ._strategies import (
    tool_call_conversations as tool_call_conversations,
)
from ._strategies import (
    tool_calls as tool_calls,
)
