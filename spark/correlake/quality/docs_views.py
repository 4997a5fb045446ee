"""The Data Docs views of the lake's site (`gx._context`): Great Expectations' own, with
their Jinja templates compiled once a process. GX makes a view, and with it a Jinja
environment with an empty template cache, at each build of the pages, and compiling its
templates again was most of a gate's page build."""

from __future__ import annotations

from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView
from jinja2 import BytecodeCache


class _Compiled(BytecodeCache):
    """The templates' compiled code, by template and source (a changed source is compiled again)."""

    def __init__(self):
        self._code = {}

    def load_bytecode(self, bucket) -> None:
        bucket.code = self._code.get((bucket.key, bucket.checksum))

    def dump_bytecode(self, bucket) -> None:
        self._code[bucket.key, bucket.checksum] = bucket.code


COMPILED = _Compiled()


class _CompiledOnce:
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.env.bytecode_cache = COMPILED


class PageView(_CompiledOnce, DefaultJinjaPageView):
    """A suite's or a validation's page."""


class IndexPageView(_CompiledOnce, DefaultJinjaIndexPageView):
    """The site's index."""
