"""mkdocs hooks of the documentation site.

mkdocs-click 0.9 prints click 8.3's "no default" sentinel as an option's default
(``Sentinel.UNSET``); until its fix lands (mkdocs/mkdocs-click#95, which reads
``Option.to_info_dict``), each option is shown with the default click itself reports: a required
option reads ``_required``, one with no default ``None``."""

from __future__ import annotations

import copy
from typing import Any


def on_startup(**_: Any) -> None:
    import click
    from mkdocs_click import _docs

    shown = _docs._format_table_option_row
    if getattr(shown, "reads_click_defaults", False):
        return

    def row(option: click.Option) -> str:
        default = option.to_info_dict()["default"]
        if default is not option.default:
            option = copy.copy(option)
            option.default = default
        return shown(option)

    row.reads_click_defaults = True  # type: ignore[attr-defined]
    _docs._format_table_option_row = row
