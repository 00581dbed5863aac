"""The op: what runs when a model calls :func:`ttnn_flashdecode.attention`.

Validation (:mod:`.validate`) -> plan, cached (:mod:`.plan`: :mod:`.schedule`, :mod:`.residency`,
:mod:`.program_factory` over the parameter block of :mod:`.protocol`) -> launch (:mod:`.launch`:
``ttnn.generic_op`` on a card, the emulator otherwise). The ttnn drop-ins live in
:mod:`.transformer`. Nothing here imports :mod:`ttnn_flashdecode.tools`.
"""
