"""The golden set: JSONL, one case a line: {"id"?, "prompt", "expected", "prompt_tokens"?}.

`expected` is the completion the reference model gives (temperature 0); `prompt_tokens`, when
known, is the reference tokenizer's count for the prompt (beginning-of-text token included).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from opsctl.errors import ConfigError, printable

KEYS = ("id", "prompt", "expected", "prompt_tokens")


@dataclass(frozen=True)
class GoldenCase:
    id: str
    prompt: str
    expected: str
    prompt_tokens: int | None = None


def load_golden(path: Path) -> list[GoldenCase]:
    """Parse and validate the whole file; every problem is listed with its line number."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{path}: golden file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read golden file: {exc}") from exc
    cases: list[GoldenCase] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON ({exc.msg})")
            continue
        if not isinstance(raw, dict):
            problems.append(f"{where}: expected a JSON object with prompt and expected")
            continue
        unknown = sorted(set(raw) - set(KEYS))
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(map(printable, unknown))} (known keys: {', '.join(KEYS)})")
        prompt, expected, tokens = raw.get("prompt"), raw.get("expected"), raw.get("prompt_tokens")
        if not isinstance(prompt, str) or not prompt:
            problems.append(f"{where}: 'prompt' must be a non-empty string")
        if not isinstance(expected, str):
            problems.append(f"{where}: 'expected' must be a string (the reference completion)")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
            problems.append(f"{where}: 'prompt_tokens' must be a positive integer")
        case_id = raw.get("id", f"line-{number}")
        if not isinstance(case_id, (str, int)) or isinstance(case_id, bool):
            problems.append(f"{where}: 'id' must be a string or an integer")
            continue
        case_id = str(case_id)
        if case_id in seen:
            problems.append(f"{where}: duplicate id {case_id!r}")
        seen.add(case_id)
        if len(problems) == 0 and isinstance(prompt, str) and isinstance(expected, str):
            cases.append(GoldenCase(case_id, prompt, expected, tokens))
    if problems:
        raise ConfigError(f"{path}: invalid golden file", problems=problems)
    if not cases:
        raise ConfigError(f"{path}: the golden file has no cases", hint="one JSON object per line: "
                          '{"id": "c1", "prompt": "...", "expected": "..."}')
    return cases
