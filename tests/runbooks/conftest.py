"""A temp copy of the shipped config (opsctl.yaml and slos/) and helpers to read generated runbooks."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO

FENCE = re.compile(r"^(\s*)```(\w*)\s*$")


def copy_shipped(directory: Path) -> Path:
    """opsctl.yaml and slos/ from the repository root, so relative paths resolve the same way."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "opsctl.yaml", directory / "opsctl.yaml")
    shutil.copytree(REPO / "slos", directory / "slos")
    return directory / "opsctl.yaml"


@pytest.fixture
def shipped(tmp_path) -> Path:
    return copy_shipped(tmp_path / "site")


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced code block, indented ones (inside list items) included."""
    blocks, lang, lines, indent = [], None, [], ""
    for line in text.splitlines():
        m = FENCE.match(line)
        if lang is None and m:
            lang, lines, indent = m.group(2), [], m.group(1)
        elif lang is not None and m:
            blocks.append((lang, lines))
            lang = None
        elif lang is not None:
            lines.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
    assert lang is None, "unterminated code block"
    return blocks


def opsctl_commands(text: str) -> list[list[str]]:
    """Each `opsctl ...` line of the fenced blocks, split as the shell would (continuations joined)."""
    commands = []
    for _lang, lines in fenced_blocks(text):
        joined, buffer = [], ""
        for line in lines:
            if line.rstrip().endswith("\\"):
                buffer += line.rstrip()[:-1] + " "
                continue
            joined.append(buffer + line)
            buffer = ""
        for line in joined:
            if line.strip().startswith("opsctl "):
                commands.append(shlex.split(line.strip(), comments=True))
    return commands


def read_dir(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
