#!/usr/bin/env python3
"""A forward HTTP proxy for the http plugin's tests, in the standard library only. It serves

  CONNECT host:port         a tunnel: "200 Connection established", then bytes both ways
  METHOD http://host/path   a plain request in absolute form, sent on to the host in origin
                            form without the proxy's own headers; the answer comes back with
                            its Content-Length, and the client's connection is kept alive

With --credentials USER:PASSWORD, a request without `Proxy-Authorization: Basic <base64 of
them>` is answered 407 and nothing is sent on. Every request is appended to the --record file as
one JSON line: {"method", "target", "authorized"} (never the credentials).
Usage: proxy.py --port P --record FILE [--credentials USER:PASSWORD]
"""
import argparse
import base64
import http.client
import json
import select
import socket
import socketserver
import sys
import threading
from urllib.parse import urlsplit

lock = threading.Lock()


def relay(a, b):
    """Copies bytes both ways until either side closes."""
    sockets = [a, b]
    try:
        while True:
            readable, _, _ = select.select(sockets, [], [], 60)
            if not readable:
                return
            for s in readable:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return
    finally:
        b.close()


def make_handler(args):
    expected = None
    if args.credentials:
        expected = "Basic " + base64.b64encode(args.credentials.encode()).decode()

    class Handler(socketserver.StreamRequestHandler):
        rbufsize = 0  # unbuffered: a tunnel's first bytes must not stay in a buffer here

        def record(self, method, target, authorized):
            with lock:
                with open(args.record, "a") as f:
                    f.write(json.dumps({"method": method, "target": target,
                                        "authorized": authorized}) + "\n")

        def head(self):
            line = self.rfile.readline(65537)
            if not line:
                return None
            method, target, _ = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
            headers = {}
            while True:
                h = self.rfile.readline(65537)
                if h in (b"\r\n", b"\n", b""):
                    break
                name, value = h.decode("latin-1").split(":", 1)
                headers[name.strip().lower()] = value.strip()
            return method, target, headers

        def read_exactly(self, n):
            data = b""
            while len(data) < n:
                chunk = self.rfile.read(n - len(data))
                if not chunk:
                    break
                data += chunk
            return data

        def handle(self):
            while True:
                parsed = self.head()
                if parsed is None:
                    return
                method, target, headers = parsed
                authorized = expected is None or headers.get("proxy-authorization") == expected
                self.record(method, target, authorized)
                body = b""
                if method != "CONNECT":
                    body = self.read_exactly(int(headers.get("content-length", "0")))
                if not authorized:
                    text = b"proxy credentials required"
                    self.wfile.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                     b"Proxy-Authenticate: Basic realm=\"test\"\r\n"
                                     b"Content-Length: %d\r\n\r\n" % len(text) + text)
                    continue
                if method == "CONNECT":
                    host, port = target.rsplit(":", 1)
                    upstream = socket.create_connection((host.strip("[]"), int(port)), 10)
                    upstream.settimeout(None)
                    self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    relay(self.connection, upstream)
                    return
                url = urlsplit(target)
                forward = {k: v for k, v in headers.items()
                           if k not in ("proxy-authorization", "connection", "content-length")}
                conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)
                path = (url.path or "/") + ("?" + url.query if url.query else "")
                conn.request(method, path, body=body, headers=forward)
                answer = conn.getresponse()
                data = answer.read()
                out = "HTTP/1.1 %d %s\r\n" % (answer.status, answer.reason)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "connection", "keep-alive",
                                            "transfer-encoding"):
                        out += "%s: %s\r\n" % (name, value)
                out += "Content-Length: %d\r\n\r\n" % len(data)
                self.wfile.write(out.encode("latin-1") + data)
                conn.close()

    return Handler


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--credentials")
    args = p.parse_args()
    server = Server(("127.0.0.1", args.port), make_handler(args))
    print("listening", flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
