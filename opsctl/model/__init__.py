"""The typed-model engine every input of opsctl goes through (config, scenarios, SLO files, payloads).

`Model` (base.py) defines frozen, dataclass-compatible classes cheaply; `build` (build.py) turns raw
data into them, or into plain dataclasses, reporting every problem at once with its key path.
"""

from opsctl.model.base import Model, field
from opsctl.model.build import build, build_into, to_dict
from opsctl.model.types import Duration

__all__ = ["Duration", "Model", "build", "build_into", "field", "to_dict"]
