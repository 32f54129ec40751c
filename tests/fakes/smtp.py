"""A real SMTP server (aiosmtpd) on 127.0.0.1: STARTTLS with a trustme certificate, AUTH checked
against one user, every accepted message kept, and scripted temporary failures on DATA."""

from __future__ import annotations

import socket
import ssl
from email import message_from_bytes, policy

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Handler:
    def __init__(self, server):
        self.server = server

    async def handle_DATA(self, smtp, session, envelope):
        if self.server.data_failures:
            return self.server.data_failures.pop(0)
        self.server.messages.append({
            "mail_from": envelope.mail_from, "rcpt_tos": list(envelope.rcpt_tos),
            "message": message_from_bytes(envelope.original_content, policy=policy.default),
            "raw": envelope.original_content, "authenticated": session.authenticated,
            "tls": session.ssl is not None,
        })
        for hook in list(self.server.after_data_hooks):
            hook()
        return "250 OK"


class FakeSMTP:
    def __init__(self, ca, *, username: str, password: str, starttls: bool = True):
        self.username = username
        self.password = password
        self.messages: list[dict] = []
        self.data_failures: list[str] = []
        self.after_data_hooks: list = []  # run after a message arrived, before the server answers
        self.auth_attempts: list[str] = []
        context = None
        if starttls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        self.port = free_port()
        self.controller = Controller(
            _Handler(self), hostname="127.0.0.1", port=self.port, authenticator=self._authenticate,
            auth_require_tls=starttls, require_starttls=starttls, tls_context=context, ready_timeout=10,
        )

    def _authenticate(self, server, session, envelope, mechanism, auth_data):
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        user = auth_data.login.decode()
        self.auth_attempts.append(user)
        ok = user == self.username and auth_data.password.decode() == self.password
        return AuthResult(success=ok, handled=False)

    def fail_next_data(self, reply: str = "451 4.3.0 Temporary failure, try again later", times: int = 1):
        self.data_failures.extend([reply] * times)

    def __enter__(self):
        self.controller.start()
        return self

    def __exit__(self, *exc):
        self.controller.stop()
