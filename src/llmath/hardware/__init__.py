"""Devices as data (peaks per format, memory, bandwidth, interconnect), the roofline and efficiency.

:mod:`.registry` loads the bundled table and users' hardware files; :mod:`.roofline` turns an operator
list into time per operator. Depends on :mod:`llmath.ops` and :mod:`llmath.model` only.
"""

from llmath.hardware.registry import KINDS, Hardware, Link, aliases, custom, from_dict, get, load_file, names, raw

__all__ = ["KINDS", "Hardware", "Link", "aliases", "custom", "from_dict", "get", "load_file", "names", "raw"]
