"""The algorithms by ``algo.name``: one line each. An algorithm is a package beside this module with its settings
(``config``, whose class names its summary, its loop and its learner) and its learner; listing its settings class
here is all it takes for ``train``, ``unilab list``, the checkpoint check and the support matrix to offer it."""

from __future__ import annotations

from unilab.train.flashsac.config import FlashSACConfig
from unilab.train.ppo.config import PPOConfig
from unilab.train.sac.config import SACConfig
from unilab.train.settings import RunSettings

ALGORITHMS: dict[str, type[RunSettings]] = {
    settings.name: settings
    for settings in (
        SACConfig,
        FlashSACConfig,
        PPOConfig,
    )
}
