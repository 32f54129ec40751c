"""The CAs a TLS call trusts: the system's, plus the bundles users name as they do for curl."""

from __future__ import annotations

from typing import Mapping

from opsctl.errors import UsageError


CA_BUNDLE_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def tls_context(ca_file=None, env: Mapping[str, str] | None = None):
    """The system's trusted CAs (OpenSSL's default paths, so `SSL_CERT_FILE` / `SSL_CERT_DIR` as
    set), plus the bundle named by `REQUESTS_CA_BUNDLE` (else `CURL_CA_BUNDLE`) and `ca_file` when
    set (a TLS-inspecting proxy, a private CA). Bundles are added to the system's, never replace it."""
    import os
    import ssl

    env = os.environ if env is None else env
    context = ssl.create_default_context()
    bundles: list[tuple[str, str]] = []
    named = next((name for name in CA_BUNDLE_VARS if env.get(name)), None)
    if named:
        bundles.append((named, env[named]))
    if ca_file:
        bundles.append(("ca_file", str(ca_file)))
    default = ssl.get_default_verify_paths().cafile  # already loaded (SSL_CERT_FILE when set)
    for where, path in bundles:
        if default and os.path.realpath(path) == os.path.realpath(default):
            continue  # the common REQUESTS_CA_BUNDLE=<the system bundle>: loaded once, not twice
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"{where} {path}: cannot load it as a CA bundle: {exc}") from exc
    return context
