"""Email over SMTP (smtplib): for vendors whose support takes cases by mail.

The category and severity go into the subject and headers in the vendor's words. The Message-ID
is derived from the idempotency key, so a resend is recognisable as the same message. Sent mail
cannot be read back: `status` says so (readable=False), it never guesses.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path

from opsctl.errors import UsageError
from opsctl.remote import RemoteAuthError, RemoteRejected, RemoteUnavailable, short, tls_context
from opsctl.tickets.base import ChannelProvider, FiledTicket, TicketRequest, TicketStatus, route

NOT_READABLE = ("email cannot be read back: the vendor answers by mail; check the support inbox or the "
                "vendor's support portal for this ticket's status")


class EmailProvider(ChannelProvider):
    name = "email"
    can_find = False
    resend_is_safe = False

    def __init__(self, settings, vendor: str, vendor_cfg, *, service: str, ca_file: Path | None = None, clock=None):
        super().__init__(settings, vendor, vendor_cfg, service=service, ca_file=ca_file, clock=clock)

    def message(self, request: TicketRequest) -> EmailMessage:
        r = route(request, self.vendor_cfg, service=self.service)
        msg = EmailMessage()
        msg["From"] = self.settings.from_addr
        msg["To"] = self.vendor_cfg.to
        msg["Subject"] = f"[{r.severity}] [{r.category}] {r.title}"
        msg["Date"] = formatdate(self.clock.now(), usegmt=True)
        msg["Message-ID"] = f"<{request.key}@opsctl.{self.service}>"
        msg["X-Opsctl-Idempotency-Key"] = request.key
        msg["X-Opsctl-Category"] = f"{r.category} ({request.category})"
        msg["X-Opsctl-Severity"] = f"{r.severity} ({request.severity})"
        msg["X-Opsctl-Tags"] = ", ".join(r.tags)
        if request.drill:
            msg["X-Opsctl-Drill"] = "yes"
        msg.set_content(r.body)
        return msg

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket:
        s = self.settings
        msg = self.message(request)
        where = f"{s.host}:{s.port}"
        timeout = timeout or s.retry.timeout
        sending = False
        try:
            context = tls_context(self.ca_file)
            smtp: smtplib.SMTP
            if s.security == "ssl":
                smtp = smtplib.SMTP_SSL(s.host, s.port, timeout=timeout, context=context)
            else:
                smtp = smtplib.SMTP(s.host, s.port, timeout=timeout)
            with smtp:
                if s.security == "starttls":
                    smtp.starttls(context=context)
                if s.username:
                    password = s.password.resolve()
                    self.redactor.add(password)
                    smtp.login(s.username, password)
                sending = True
                smtp.send_message(msg)
        except smtplib.SMTPAuthenticationError as exc:
            raise RemoteAuthError(
                f"SMTP server {where} rejected the login for {s.username} ({exc.smtp_code})",
                status=exc.smtp_code, permission=f"send mail as {s.from_addr}",
                hint=f"check tickets.email.username and tickets.email.password ({s.password.describe()})",
            ) from None
        except smtplib.SMTPNotSupportedError as exc:
            raise UsageError(f"SMTP server {where}: {self._text(exc)}",
                             hint="set tickets.email.security to what the server offers (starttls, ssl, none)") from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = {rcpt: code for rcpt, (code, _) in exc.recipients.items()}
            if all(400 <= c < 500 for c in codes.values()):
                raise RemoteUnavailable(f"SMTP server {where} deferred recipients {codes}", maybe_sent=False) from None
            raise RemoteRejected(f"SMTP server {where} refused recipients {codes}",
                                 hint=f"check tickets.vendors.{self.vendor}.to") from None
        except smtplib.SMTPResponseException as exc:
            if 400 <= exc.smtp_code < 500:  # temporary: the server did not take the message
                raise RemoteUnavailable(f"SMTP server {where}: {exc.smtp_code} {self._text(exc)}",
                                        maybe_sent=False) from None
            raise RemoteRejected(f"SMTP server {where}: {exc.smtp_code} {self._text(exc)}") from None
        except ssl.SSLCertVerificationError as exc:
            raise UsageError(f"SMTP server {where}: TLS certificate not trusted ({exc.verify_message})",
                             hint="set tickets.email.ca_file to the CA bundle that signed it") from None
        except (smtplib.SMTPException, OSError, socket.timeout) as exc:
            # Before DATA nothing was sent; a failure while sending may have delivered the mail.
            raise RemoteUnavailable(f"SMTP server {where}: {type(exc).__name__}: {self._text(exc)}",
                                    maybe_sent=sending) from None
        return FiledTicket(id=msg["Message-ID"], provider=self.name, vendor=self.vendor, key=request.key,
                           filed_at=self.clock.now(), category=request.category, severity=request.severity,
                           subject=msg["Subject"], drill=request.drill, url=None, status="sent", outcome="filed")

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None:
        raise UsageError("email: a sent message cannot be looked up")

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus:
        return TicketStatus(id=ticket_id, provider=self.name, vendor=self.vendor, readable=False, status="sent",
                            note=NOT_READABLE)

    def plan(self, request: TicketRequest) -> list[dict]:
        s = self.settings
        return [{
            "smtp": f"{s.host}:{s.port}",
            "security": s.security,
            "login": f"{s.username} / <redacted:{s.password.describe()}>" if s.username else None,
            "envelope_from": s.from_addr,
            "envelope_to": [self.vendor_cfg.to],
            "message": self.message(request).as_string(),
        }]

    def _text(self, exc: BaseException) -> str:
        raw = getattr(exc, "smtp_error", None)
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or exc)
        return self.redactor.scrub(short(text))
