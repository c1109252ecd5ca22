"""Imported in each of vLLM's CPU worker processes, to let them use Intel AMX tiles.

Linux hands out AMX tile state only to processes that ask for it
(`arch_prctl(ARCH_REQ_XCOMP_PERM)`); one that runs an AMX instruction without asking dies
with SIGILL.  vLLM's CPU attention picks its AMX kernel for bfloat16 on any CPU that has
AMX, and relies on oneDNN having asked first, from the bfloat16 matmuls of the model's
linear layers.  A LoRA-enabled engine runs those layers another way, so nothing asks, and
the worker dies on the first request ("Illegal instruction", then EngineDeadError).
Asking once, when the worker starts, is harmless where AMX is already allowed.

`engine_config.with_amx_worker()` names `AmxPermission` as vLLM's `worker_extension_cls`:
vLLM imports this module in every worker before the model runs.
"""

from __future__ import annotations

import torch

if torch.cpu._is_amx_tile_supported():
    torch.cpu._init_amx()


class AmxPermission:
    """Adds nothing to the worker: importing this module is what counts."""


QUALNAME = f"{__name__}.{AmxPermission.__qualname__}"
