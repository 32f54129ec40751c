"""A loopback OpenAI-compatible model server: POST /v1/completions and /v1/chat/completions.

The "model" answers from a table (prompt -> answer) and counts prompt tokens like a tokenizer that
prepends a beginning-of-text (BOS) token: 1 + the prompt's words (+ 4 for the chat template).
`drop_bos=True` is the broken vendor release: the tokenizer forgets BOS, so `usage.prompt_tokens`
is one lower on every prompt, and the model answers differently on the `bos_sensitive` prompts.
`unstable` maps prompts to answers given in turn, call after call: the batching and numerics noise
that keeps a model's agreement with itself under 100%.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable

from tests.fakes.loopback import LoopbackServer, Request, Response

CHAT_TEMPLATE_TOKENS = 4


def prompt_tokens(prompt: str, *, bos: bool = True, chat: bool = False) -> int:
    return (1 if bos else 0) + len(prompt.split()) + (CHAT_TEMPLATE_TOKENS if chat else 0)


def degraded(answer: str) -> str:
    """What the model says without its BOS token: it repeats itself."""
    words = answer.split()
    return answer + " " + (words[-1] if words else "and")


class OpenAIFake(LoopbackServer):
    def __init__(self, answers: dict[str, str], *, model: str = "llm-inference-ft", drop_bos: bool = False,
                 bos_sensitive: Iterable[str] = (), accept: Callable[[str | None], bool] | None = None,
                 script: Iterable[Response] = (), delay: float = 0.0, prefix: str = "/v1",
                 unstable: dict[str, list[str]] | None = None):
        super().__init__()
        self.answers = dict(answers)
        self.model = model
        self.drop_bos = drop_bos
        self.bos_sensitive = set(bos_sensitive)
        self.accept = accept
        self.script = list(script)  # answered, in order, before the model answers anything
        self.delay = delay
        self.prefix = prefix
        self.in_flight = 0
        self.max_in_flight = 0
        self._flight_lock = threading.Lock()
        self.served = 0  # answers with status 200
        self.unstable = dict(unstable or {})
        self.asked: dict[str, int] = {}  # calls per unstable prompt

    @property
    def base_url(self) -> str:
        return self.url + self.prefix

    def handle(self, request: Request) -> Response:
        with self._flight_lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            return self._answer(request)
        finally:
            with self._flight_lock:
                self.in_flight -= 1

    def _answer(self, request: Request) -> Response:
        if request.method != "POST":
            return Response(405, {"error": {"message": "method not allowed"}})
        chat = request.path == f"{self.prefix}/chat/completions"
        if not chat and request.path != f"{self.prefix}/completions":
            return Response(404, {"error": {"message": f"no route {request.path}"}})
        if self.accept is not None and not self.accept(request.headers.get("authorization")):
            return Response(401, {"error": {"message": "invalid or expired token", "code": 401}})
        with self.lock:
            scripted = self.script.pop(0) if self.script else None
        if scripted is not None:
            return scripted
        try:
            body = request.json()
        except ValueError:
            return Response(400, {"error": {"message": "body is not JSON"}})
        if body.get("model") != self.model:
            return Response(404, {"error": {"message": f"model {body.get('model')!r} does not exist"}})
        if chat:
            messages = body.get("messages")
            if not (isinstance(messages, list) and messages and messages[-1].get("role") == "user"):
                return Response(400, {"error": {"message": "messages must end with a user message"}})
            prompt = messages[-1]["content"]
        else:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                return Response(400, {"error": {"message": "prompt must be a string"}})
        answer = self.answers.get(prompt, "I do not know.")
        if prompt in self.unstable:
            with self.lock:
                turn = self.asked.get(prompt, 0)
                self.asked[prompt] = turn + 1
            answer = self.unstable[prompt][turn % len(self.unstable[prompt])]
        if self.drop_bos and prompt in self.bos_sensitive:
            answer = degraded(answer)
        usage = {
            "prompt_tokens": prompt_tokens(prompt, bos=not self.drop_bos, chat=chat),
            "completion_tokens": len(answer.split()),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        choice = ({"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                  if chat else {"index": 0, "text": answer, "finish_reason": "stop"})
        with self.lock:
            self.served += 1
        return Response(200, {
            "id": f"cmpl-{self.served}", "object": "chat.completion" if chat else "text_completion",
            "model": self.model, "choices": [choice], "usage": usage,
        })
