"""`remote.http_call` as users run it: through the proxies and CA bundles they set in the environment
(against a loopback CONNECT/forward proxy, tests/fakes/proxy.py, which counts what it relays, and a loopback
HTTPS server signed by a test CA), with the overall deadline kept through the proxy."""

from __future__ import annotations

import base64
import socket
import time

import pytest

from opsctl.errors import UsageError
from opsctl.remote import DeadlineExceeded, ProxyError, _no_proxy_match, http_call, proxy_for
from tests.fakes.fixtures import ca, ca_file  # noqa: F401  (fixtures)
from tests.fakes.https import FakeHTTPSServer
from tests.fakes.loopback import LoopbackServer, Response
from tests.fakes.proxy import LoopbackProxy


class Echo(FakeHTTPSServer):
    service = "echo"

    def route(self, req):
        return 200, {"path": req.path, "saw_proxy_auth": "proxy-authorization" in req.headers}, {}


class PlainEcho(LoopbackServer):
    def handle(self, request):
        return Response(200, {"path": request.path, "saw_proxy_auth": "proxy-authorization" in request.headers})


def deadline(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def get(url, env, **kw):
    return http_call("GET", url, deadline=kw.pop("deadline", deadline()), env=env, **kw)


# -- NO_PROXY and the choice of proxy --------------------------------------------------------------

@pytest.mark.parametrize("host,port,no_proxy,exempt", [
    ("api.example.com", 443, "example.com", True),
    ("api.example.com", 443, ".example.com", True),
    ("example.com", 443, ".example.com", True),
    ("badexample.com", 443, "example.com", False),
    ("API.Example.COM", 443, "example.com", True),
    ("localhost", 80, "localhost,127.0.0.1", True),
    ("127.0.0.1", 80, "localhost, 127.0.0.1", True),
    ("127.0.0.1", 80, "localhost", False),          # curl resolves nothing: the address must be listed
    ("localhost", 80, "", False),                   # nor is localhost exempt unless listed
    ("127.0.0.2", 80, "127.0.0.1", False),
    ("10.1.2.3", 80, "10.0.0.0/8", True),
    ("11.1.2.3", 80, "10.0.0.0/8", False),
    ("::1", 443, "::1", True),
    ("::1", 443, "[::1]:443", True),
    ("::1", 8443, "[::1]:443", False),
    ("prom.internal", 9090, "prom.internal:9090", True),
    ("prom.internal", 9091, "prom.internal:9090", False),
    ("anything.at.all", 1, "*", True),
    ("10.1.2.3", 80, "10.1", False),                # no partial addresses
])
def test_no_proxy_matches_hosts_as_curl_does(host, port, no_proxy, exempt):
    assert _no_proxy_match(host, port, no_proxy) is exempt


def test_the_proxy_is_chosen_by_scheme_lower_case_first_and_credentials_become_basic_auth():
    env = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://u%40x:p%3Ass@lower:3128",
           "HTTP_PROXY": "proxy.corp:8080"}
    https = proxy_for("https://api.example.com/x", env)
    assert (https.host, https.port) == ("lower", 3128)
    assert https.authorization == "Basic " + base64.b64encode(b"u@x:p:ss").decode()
    assert "p:ss" not in https.shown and "u@x" not in https.shown
    plain = proxy_for("http://api.example.com/x", env)
    assert (plain.host, plain.port, plain.authorization) == ("proxy.corp", 8080, None)
    assert proxy_for("https://api.example.com/x", {"ALL_PROXY": "http://all:9"}).host == "all"
    assert proxy_for("https://api.example.com/x", {**env, "NO_PROXY": "example.com"}) is None
    assert proxy_for("https://api.example.com/x", {}) is None


def test_a_proxy_opsctl_cannot_speak_is_refused_not_bypassed():
    for value in ("https://proxy:3128", "socks5://proxy:1080"):
        with pytest.raises(UsageError, match="only http:// proxies") as err:
            proxy_for("https://api.example.com", {"HTTPS_PROXY": value})
        assert err.value.exit_code == 2


# -- through a loopback proxy ---------------------------------------------------------------------

def test_https_goes_through_a_connect_tunnel_and_the_proxy_credential_stays_with_the_proxy(ca, ca_file):
    auth = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    with Echo(ca) as server, LoopbackProxy(require=auth) as proxy:
        env = {"HTTPS_PROXY": f"http://ops:s3cret@127.0.0.1:{proxy.port}"}
        answer = get(server.url + "/v1/things?a=1", env, ca_file=str(ca_file))
        answer2 = get(server.url + "/v1/other", env, ca_file=str(ca_file))
    assert answer.status == 200 and answer2.status == 200
    assert proxy.lines == [f"CONNECT 127.0.0.1:{server.port} HTTP/1.1"] * 2
    assert proxy.headers[0]["proxy-authorization"] == auth
    assert proxy.tunnels == 2 and proxy.forwarded == 0
    assert proxy.relayed > len(answer.body) + len(answer2.body)  # TLS records both ways, not just the bodies
    assert [r.path for r in server.requests] == ["/v1/things", "/v1/other"]
    assert b'"saw_proxy_auth": false' in answer.body  # never sent inside the tunnel


def test_http_goes_to_the_proxy_in_absolute_form():
    auth = "Basic " + base64.b64encode(b"ops:pw").decode()
    with PlainEcho() as server, LoopbackProxy(require=auth) as proxy:
        env = {"http_proxy": f"http://ops:pw@127.0.0.1:{proxy.port}"}
        answer = get(server.url + "/api/v1/query?x=1", env)
    assert answer.status == 200
    assert proxy.lines == [f"GET {server.url}/api/v1/query?x=1 HTTP/1.1"]
    assert proxy.headers[0]["host"] == server.url.removeprefix("http://")
    assert proxy.headers[0]["proxy-authorization"] == auth
    assert proxy.forwarded == 1 and proxy.tunnels == 0
    assert [r.path for r in server.requests] == ["/api/v1/query?x=1"]


def test_no_proxy_for_loopback_connects_directly(ca, ca_file):
    with Echo(ca) as server, PlainEcho() as plain, LoopbackProxy() as proxy:
        env = {"HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "NO_PROXY": "localhost,127.0.0.1"}
        assert get(server.url + "/a", env, ca_file=str(ca_file)).status == 200
        assert get(plain.url + "/b", env).status == 200
    assert proxy.lines == [] and proxy.relayed == 0
    assert len(server.requests) == 1 and len(plain.requests) == 1


def test_a_proxy_demanding_credentials_is_a_usage_error_naming_no_secret(ca, ca_file):
    with Echo(ca) as server, LoopbackProxy(require="Basic nope") as proxy:
        with pytest.raises(UsageError, match="requires authentication") as err:
            get(server.url + "/a", {"HTTPS_PROXY": f"http://ops:hunter2@127.0.0.1:{proxy.port}"}, ca_file=str(ca_file))
        with PlainEcho() as plain, pytest.raises(UsageError, match="requires authentication") as err2:
            get(plain.url + "/a", {"HTTP_PROXY": f"http://ops:hunter2@127.0.0.1:{proxy.port}"})
    for e in (err.value, err2.value):
        assert e.exit_code == 2
        assert "hunter2" not in str(e) and "hunter2" not in (e.hint or "") and "ops:" not in str(e)
    assert server.requests == []


def test_a_connect_refused_by_the_proxy_is_a_proxy_error(ca, ca_file):
    class Refusing(LoopbackProxy):
        def _tunnel(self, client, target):
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    with Echo(ca) as server, Refusing() as proxy:
        with pytest.raises(ProxyError, match=r"refused CONNECT 127\.0\.0\.1:\d+: HTTP 403"):
            get(server.url + "/a", {"HTTPS_PROXY": proxy.url}, ca_file=str(ca_file))
    assert server.requests == []


def test_a_proxy_trickling_its_connect_answer_cannot_hold_the_call_past_its_deadline(ca, ca_file):
    # One byte every 0.05 s: no single read ever times out; the whole answer would take 185 s.
    with Echo(ca) as server, LoopbackProxy(trickle=0.05) as proxy:
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            get(server.url + "/a", {"HTTPS_PROXY": proxy.url}, ca_file=str(ca_file), deadline=deadline(0.5))
        elapsed = time.monotonic() - started
    assert elapsed < 5
    assert server.requests == []


# -- CA bundles ------------------------------------------------------------------------------------

def test_ca_bundles_from_the_environment_are_trusted(ca, ca_file):
    import ssl

    with Echo(ca) as server:
        with pytest.raises(ssl.SSLCertVerificationError):
            get(server.url + "/a", {})
        assert get(server.url + "/a", {"REQUESTS_CA_BUNDLE": str(ca_file)}).status == 200
        assert get(server.url + "/a", {"CURL_CA_BUNDLE": str(ca_file)}).status == 200
    assert len(server.requests) == 2


def test_ssl_cert_file_is_trusted(ca, ca_file, monkeypatch):
    # SSL_CERT_FILE is read by OpenSSL itself (its default verify paths), from the process environment.
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    with Echo(ca) as server:
        assert get(server.url + "/a", {}).status == 200
    assert len(server.requests) == 1


def test_an_unreadable_ca_bundle_names_its_variable(tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(UsageError, match="REQUESTS_CA_BUNDLE .*bad.pem: cannot load"):
        get("https://127.0.0.1:1/a", {"REQUESTS_CA_BUNDLE": str(bad)})


# -- the transport seam ----------------------------------------------------------------------------

def test_the_connector_opens_every_connection(ca, ca_file):
    opened: list[tuple[str, int]] = []

    def connect(address, timeout):
        opened.append(address)
        return socket.create_connection(address, timeout=timeout)

    with Echo(ca) as server, LoopbackProxy() as proxy:
        get(server.url + "/a", {}, ca_file=str(ca_file), connect=connect)
        get(server.url + "/b", {"HTTPS_PROXY": proxy.url}, ca_file=str(ca_file), connect=connect)
    assert opened == [("127.0.0.1", server.port), ("127.0.0.1", proxy.port)]
