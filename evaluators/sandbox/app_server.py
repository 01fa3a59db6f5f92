"""The app and the CDN mirror, served to Chromium over loopback (HTTP and TLS on one port).

Each browser worker runs one ``AppServer``. Chromium resolves the app's host and exactly the
CDN host names ``cdn_urls`` understands to it (``--host-resolver-rules``; those hosts
bypass the dead proxy every other request goes to, and every other name resolves to
nothing). The server tells plain HTTP from TLS by the first byte a connection sends; its
certificate is self-signed and contexts ignore certificate errors (it is the only TLS peer
a page can reach).

- App documents: each probe's page gets its app's HTML served under a token of its own,
  and the browser rewrites the page's request for ``APP_URL`` to that token's path (CDP,
  unseen by the page). The app thus comes from a loopback address like its libraries,
  which Chromium's local-network-access checks require of a page loading from loopback.
  Every page has the same origin, so any page could ask for any token's path: tokens are
  random (an app cannot guess another's) and are forgotten when the probe ends, so a page
  reads its own app and the CDN mirror, and no other response.
- CDN files: answered from the offline mirror with the CDNs' caching headers, so that the
  second load of a library in a context comes from Chromium's HTTP cache, with V8's
  compiled code. Answering them from Playwright's request interception instead turns that
  cache off and sends every body through the Node driver and Python as base64: a page
  using Plotly (4.6 MB) cost 585 ms of CPU that way against 150 ms from here.
- Anything else (a file the mirror lacks, another path of the app's origin) is cut off
  without an answer: the page sees a network error, as for any request the sandbox blocks.
"""

from __future__ import annotations

import http.server
import logging
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

from evaluators.cdn import CdnMirror, response_headers
from evaluators.cdn.urls import CDN_HOSTS
from evaluators.checks.textindex import scrub_surrogates

log = logging.getLogger(__name__)
APP_HOST = "app.rcca.local"
APP_ORIGIN = "http://" + APP_HOST
APP_URL = APP_ORIGIN + "/index.html"
_DOCUMENT_PREFIX = "/.rcca-app/"
_TLS_HANDSHAKE = 0x16  # first byte of a TLS ClientHello record
_DEAD_PROXY = "--proxy-server=http://127.0.0.1:9"


def ensure_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate and key for the mirror's TLS, made once with ``openssl``.

    Returns:
        (certificate path, key path).

    Raises:
        RuntimeError: ``openssl`` is missing or fails.
    """
    cert, key = directory / "cert.pem", directory / "key.pem"
    if cert.is_file() and key.is_file():
        return cert, key
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is needed once to make the CDN mirror's TLS certificate "
                           "(Debian: apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    # Several workers may start at once: each makes its own pair, the first to finish wins.
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        t_cert, t_key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        done = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "3650", "-subj",
             "/CN=rcca CDN mirror", "-keyout", str(t_key), "-out", str(t_cert)],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError("openssl could not make the mirror's certificate: "
                               + done.stderr.strip()[:500])
        if not (cert.is_file() and key.is_file()):
            os.replace(t_key, key)
            os.replace(t_cert, cert)
    return cert, key


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: "AppServer"):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner

    def finish_request(self, request, client_address) -> None:
        # In the connection's own thread, so that a slow handshake holds up no other.
        request.settimeout(30)
        first = request.recv(1, socket.MSG_PEEK)
        if first and first[0] == _TLS_HANDSHAKE:
            if self.owner.tls is None:
                return
            request = self.owner.tls.wrap_socket(request, server_side=True)
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address) -> None:
        # A page that went away mid-answer (a reset slot, a cancelled load) is routine.
        log.debug("loopback connection from %s ended early", client_address, exc_info=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: Chromium reuses its connections

    def log_message(self, fmt, *args) -> None:
        pass  # one line per file would drown the worker's log

    def _refuse(self) -> None:
        # No answer at all: the page sees a network error, as for any blocked request.
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send(self, status: int, headers: dict[str, str], data: bytes, body: bool) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _serve(self, body: bool) -> None:
        owner: AppServer = self.server.owner
        host = self.headers.get("Host", "").split(":", 1)[0].lower()
        if host == APP_HOST:
            html = owner.document(self.path)
            if html is not None:
                self._send(200, {"content-type": "text/html; charset=utf-8",
                                 "cache-control": "no-store"}, html, body)
            elif self.path == "/favicon.ico":
                self._send(404, {"cache-control": "max-age=86400"}, b"", body)
            else:
                self._refuse()
            return
        scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
        hit = owner.mirror.resolve(f"{scheme}://{host}{self.path}") if owner.mirror else None
        if hit is None:
            self._refuse()
            return
        self._send(200, response_headers(hit), owner.mirror.read(hit), body)

    def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
        self._serve(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(body=False)

    def do_OPTIONS(self) -> None:  # noqa: N802 - a CORS preflight, answered as the CDNs do
        self._send(204, {"access-control-allow-origin": "*",
                         "access-control-allow-methods": "GET, HEAD, OPTIONS",
                         "access-control-allow-headers":
                             self.headers.get("access-control-request-headers", "*"),
                         "access-control-max-age": "86400"}, b"", False)


class AppServer:
    """Serves app documents and, with a mirror, the CDN files, from a thread of its own.

    Args:
        mirror: The offline CDN mirror, or None (then every CDN request fails).
        tls_dir: Where the self-signed certificate is kept (made on first use); default
            ``<mirror root>/tls``.
    """

    def __init__(self, mirror: CdnMirror | None = None, tls_dir: Path | None = None):
        self.mirror = mirror
        self.tls: ssl.SSLContext | None = None
        if mirror is not None:
            cert, key = ensure_certificate(Path(tls_dir) if tls_dir else mirror.root / "tls")
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(cert, key)
            self.tls.set_alpn_protocols(["http/1.1"])
        self._documents: dict[str, bytes] = {}
        self._server = _Server(self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="app-server",
                                        daemon=True)
        self._thread.start()

    def serve(self, html: str) -> tuple[str, str]:
        """Serves ``html`` under a new random token until ``forget(token)``.

        Returns:
            (token, the URL a page's APP_URL request is sent to).
        """
        token = secrets.token_urlsafe(24)  # 192 bits: other pages cannot guess it
        self._documents[token] = scrub_surrogates(html).encode("utf-8")
        return token, APP_ORIGIN + _DOCUMENT_PREFIX + token

    def forget(self, token: str) -> None:
        """Stops serving a token's document: its path is refused from now on."""
        self._documents.pop(token, None)

    def document(self, path: str) -> bytes | None:
        if not path.startswith(_DOCUMENT_PREFIX):
            return None
        return self._documents.get(path[len(_DOCUMENT_PREFIX):])

    def chromium_args(self) -> list[str]:
        """Flags that send the app's host and the CDN hosts here and everything else nowhere.

        Every other request goes to a proxy that does not exist (IP literals, which no
        resolver rule sees, too) and every other host name resolves to nothing; loopback is
        not bypassed, so a page cannot reach this port by its address.
        """
        hosts = [APP_HOST] + (sorted(CDN_HOSTS) if self.mirror is not None else [])
        rules = ", ".join([f"MAP {h} 127.0.0.1:{self.port}" for h in hosts] + ["MAP * ~NOTFOUND"])
        return [_DEAD_PROXY, "--proxy-bypass-list=" + ";".join(hosts + ["<-loopback>"]),
                f"--host-resolver-rules={rules}"]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def is_cdn_url(url: str) -> bool:
    """Whether a URL names one of the CDN hosts the mirror stands in for."""
    try:
        return (urlsplit(url).hostname or "").lower() in CDN_HOSTS
    except ValueError:
        return False
