"""TurnGym backends: the embedded local backend with tinker-compatible clients, and a factory.

Quick start::

    from backend import make_service_client, SMOLLM2

    service = make_service_client()  # local unless TINKER_API_KEY is set
    trainer = service.create_lora_training_client(SMOLLM2, rank=8).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()

The local clients mirror ``tinker.ServiceClient`` / ``TrainingClient`` / ``SamplingClient``
(tinker 0.38): same method names and arguments, same ``tinker.types`` results, and futures that
work as ``.result()``, ``await fut`` and ``await fut.result_async()``; a tinker method with no
local counterpart raises :class:`UnsupportedCallError` naming it.

The cookbook's own entry points (``rl.train.main``, ``supervised.train.main``,
``preference.train_dpo.main``, recipes) run unchanged on the local backend inside
:func:`use_local_backend`, or as ``python -m backend.offline MODULE key=value ...``.

Every name is imported on first use (``lazy_loader``, names in ``__init__.pyi``): ``import
backend`` (or reading :data:`SMOLLM2`) loads no torch.
"""

import lazy_loader

from backend import _openmp

_openmp.configure()  # before torch loads GNU OpenMP: see backend/_openmp.py

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
