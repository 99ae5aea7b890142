"""The API's JSON parser: DRF's, with a nesting too deep for Python's parser a 400, not a 500.

DRF's JSONParser turns a ValueError into ParseError; `json.loads` of 100 kB of `[[[...` raises
RecursionError instead, which escaped as a 500 with a traceback (security review N9).
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class EnvlabJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply") from None
