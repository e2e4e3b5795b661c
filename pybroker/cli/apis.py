"""``pybroker apis``: print the supported APIs and versions (from the handler registry) as markdown."""

from __future__ import annotations

import argparse

from pybroker.protocol.api_keys import ApiKey


def markdown_table() -> str:
    from pybroker.server.dispatcher import supported_api_versions

    lines = ["| key | API | versions |", "|---:|---|---|"]
    for key, low, high in supported_api_versions():
        lines.append(f"| {key} | {ApiKey(key).name.title().replace('_', '')} | {low}–{high} |")
    return "\n".join(lines)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("apis", help="print the supported APIs and versions")
    parser.set_defaults(run=lambda _args: print(markdown_table()))
