"""Ticket channels on opsctl's one HTTP stack (`remote.http_call`): the proxy users set is used
(a CONNECT tunnel, counted by a loopback proxy), and an attempt is bounded as a whole by its
timeout, so a proxy trickling its answer cannot hold a ticket past it."""

from __future__ import annotations

import time

import pytest

from opsctl.remote import RemoteUnavailable
from opsctl.tickets.registry import open_ticket_provider
from tests.fakes.fixtures import load, write_config
from tests.fakes.proxy import LoopbackProxy
from tests.tickets.conftest import ZD_TOKEN, tickets_config, zendesk_section
from tests.tickets.test_zendesk import request


def test_a_ticket_goes_through_the_https_proxy_users_set(zendesk, zd_cfg, monkeypatch):
    with LoopbackProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        filed = open_ticket_provider(zd_cfg, "databricks").file(request())
    assert filed.id
    assert proxy.lines == [f"CONNECT 127.0.0.1:{zendesk.port} HTTP/1.1"] * proxy.tunnels
    assert proxy.tunnels == len(zendesk.requests) >= 1  # every call to Zendesk went through the tunnel
    assert all(ZD_TOKEN not in line for line in proxy.lines)
    assert all("authorization" not in h for h in proxy.headers)  # the API token travels inside TLS only


def test_a_trickling_proxy_cannot_hold_an_attempt_past_its_timeout(zendesk, ca_file, secret_env, tmp_path,
                                                                  monkeypatch):
    # A byte every 0.05 s: no single read times out; the CONNECT answer alone would take 185 s.
    retry = "{max_attempts: 2, base_delay: 0.01, max_delay: 0.05, deadline: 5, timeout: 0.5}"
    cfg = load(write_config(tmp_path, tickets_config("zendesk", zendesk_section(zendesk, ca_file, retry=retry))))
    with LoopbackProxy(trickle=0.05) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        started = time.monotonic()
        with pytest.raises(RemoteUnavailable, match="did not answer within 0.5s"):
            open_ticket_provider(cfg, "databricks").file(request())
        elapsed = time.monotonic() - started
    assert elapsed < 5
    assert 1 <= len(proxy.lines) <= 2  # one CONNECT per attempt, two attempts at most
    assert zendesk.requests == []
