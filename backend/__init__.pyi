"""Public names of ``backend`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .factory import (
    make_service_client as make_service_client,
)
from .factory import (
    resolve_backend as resolve_backend,
)
from .local._errors import (
    CheckpointExistsError as CheckpointExistsError,
)
from .local._errors import (
    CheckpointNotFoundError as CheckpointNotFoundError,
)
from .local._errors import (
    CustomLossError as CustomLossError,
)
from .local._errors import (
    InvalidDatumError as InvalidDatumError,
)
from .local._errors import (
    LocalBackendError as LocalBackendError,
)
from .local._errors import (
    PromptTooLongError as PromptTooLongError,
)
from .local._errors import (
    UnknownLossError as UnknownLossError,
)
from .local._errors import (
    UnsupportedCallError as UnsupportedCallError,
)
from .local._futures import (
    ClientFuture as ClientFuture,
)
from .local._service import (
    LocalSamplingClient as LocalSamplingClient,
)
from .local._service import (
    LocalServiceClient as LocalServiceClient,
)
from .local._service import (
    LocalTrainingClient as LocalTrainingClient,
)
from .model import (
    SMOLLM2 as SMOLLM2,
)
from .model import (
    TINY as TINY,
)
from .model import (
    BackendName as BackendName,
)
from .model import (
    UnknownModelError as UnknownModelError,
)
from .model import (
    load_tokenizer as load_tokenizer,
)
from .model import (
    register_tokenizers as register_tokenizers,
)
from .offline import (
    use_local_backend as use_local_backend,
)
