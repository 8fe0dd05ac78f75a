"""Public names of ``renderers_ext`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._compaction import (
    CompactingRenderer as CompactingRenderer,
)
from ._compaction import (
    extension_expected as extension_expected,
)
from ._extension import (
    ExtensionReport as ExtensionReport,
)
from ._extension import (
    check_extension as check_extension,
)
from ._extension import (
    first_divergence as first_divergence,
)
from ._register import (
    QWEN3_PRESERVE_THINKING as QWEN3_PRESERVE_THINKING,
)
from ._register import (
    TokenizerNotFoundError as TokenizerNotFoundError,
)
from ._register import (
    UnknownRendererError as UnknownRendererError,
)
from ._register import (
    load_renderer as load_renderer,
)
from ._register import (
    recommended_renderer_name as recommended_renderer_name,
)
from ._register import (
    register_renderers as register_renderers,
)
from ._render import (
    is_valid_utf8 as is_valid_utf8,
)
from ._render import (
    prompt_tokens as prompt_tokens,
)
from ._render import (
    render_action as render_action,
)
from ._render import (
    render_continuation as render_continuation,
)
from ._render import (
    stop_overlap as stop_overlap,
)
from ._render import (
    stop_token_sequences as stop_token_sequences,
)
from ._render import (
    tool_call as tool_call,
)
