"""The one name for an API object as JSON decodes it (or as we build one to send)."""

from __future__ import annotations

from typing import Any

Dict = dict[str, Any]
