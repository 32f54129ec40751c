"""A loopback Pushgateway: PUT and POST /metrics/job/<job>{/<label>/<value>} with a body in the
Prometheus text exposition format, checked line by line. PUT replaces the group; POST (push-add)
replaces only the metric families the body holds, the group's others stay, as the real one does."""

from __future__ import annotations

import re

from tests.fakes.loopback import LoopbackServer, Request, Response

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABELS = r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?\}'
_SAMPLE = re.compile(rf"^({_NAME})({_LABELS})? ([-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|NaN|Inf))$")
_TYPE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")
_HELP = re.compile(rf"^# HELP ({_NAME}) .*$")


def check_exposition(text: str) -> list[str]:
    """Problems with a text-format body (empty list when valid). A sample's TYPE must come first."""
    problems, typed = [], set()
    if not text.endswith("\n"):
        problems.append("body must end with a newline")
    for number, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith("# TYPE"):
            m = _TYPE.match(line)
            if not m:
                problems.append(f"line {number}: bad TYPE line {line!r}")
            else:
                typed.add(m.group(1))
        elif line.startswith("# HELP"):
            if not _HELP.match(line):
                problems.append(f"line {number}: bad HELP line {line!r}")
        elif line.startswith("#"):
            continue
        else:
            m = _SAMPLE.match(line)
            if not m:
                problems.append(f"line {number}: not a sample without timestamp {line!r}")
            elif m.group(1) not in typed:
                problems.append(f"line {number}: {m.group(1)} has no TYPE line before it")
    return problems


class PushgatewayFake(LoopbackServer):
    def __init__(self):
        super().__init__()
        self.groups: dict[str, str] = {}  # path -> the group's exposition text
        self.families: dict[str, dict[str, str]] = {}  # path -> family name -> its lines
        self.pushes = 0

    def handle(self, request: Request) -> Response:
        if not request.path.startswith("/metrics/job/"):
            return Response(404, b"not found\n")
        if request.method not in ("PUT", "POST"):
            return Response(405, b"only PUT and POST here\n")
        if not request.headers.get("content-type", "").startswith("text/plain"):
            return Response(400, b"text format expected\n")
        text = request.body.decode()
        problems = check_exposition(text)
        if problems:
            return Response(400, ("; ".join(problems) + "\n").encode())
        with self.lock:
            self.pushes += 1
            if request.method == "PUT":
                self.families[request.path] = {}
            group = self.families.setdefault(request.path, {})
            group.update(_families(text))
            self.groups[request.path] = "".join(group.values())
        return Response(200)


def _families(text: str) -> dict[str, str]:
    """Family name -> its lines (HELP, TYPE and samples), in the body's order."""
    out: dict[str, str] = {}
    for line in text.splitlines(keepends=True):
        if line.startswith(("# HELP ", "# TYPE ")):
            name = line.split(" ", 3)[2]
        elif line.startswith("#") or not line.strip():
            continue
        else:
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            for suffix in ("_bucket", "_count", "_sum"):
                if name.endswith(suffix) and name[: -len(suffix)] in out:
                    name = name[: -len(suffix)]
        out[name] = out.get(name, "") + line
    return out
