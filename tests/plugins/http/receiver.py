#!/usr/bin/env python3
"""A webhook receiver for the http plugin's tests, in the standard library only: it verifies
each request's Standard Webhooks signature (HMAC-SHA256 over "id.timestamp.body", header
`webhook-signature: v1,<base64>`) and answers what the payload's "answer" field asks for:

  "ok"              200
  "status:NNN"      NNN, with body "refused: <id>" (e.g. status:400, status:503)
  "once:NNN"        NNN on the first delivery of the message (by webhook-id), 200 after
  "retry-after:S"   429 with Retry-After: S on the first delivery, 200 after
  "drop-once"       closes the connection without an answer on the first delivery, 200 after
  "slow:MS"         200 after MS milliseconds; if the client closed its connection meanwhile
                    (its host killed), no answer, and the record says "abandoned"

A batch (the body is a JSON array, batch mode) is answered 200 with {"results": [...]} naming
each element's outcome from its payload's "answer": "ok" ok, "status:4NN" terminal,
"once:NNN" retry on the element's first delivery (by its "id"), "retry-after:S" delay S s on
its first delivery.
Every request is appended to the --record file as one JSON line: the headers the tests check,
the body, whether the signature verified, and the answer given.
Usage: receiver.py --port P --record FILE [--secret whsec_...] [--tls-cert C --tls-key K
       [--tls-client-ca CA]]
"""
import argparse
import base64
import hashlib
import hmac
import json
import select
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
seen = {}


def verify(secret, headers, body):
    if not secret:
        return None
    key = base64.b64decode(secret.removeprefix("whsec_"))
    msg_id = headers.get("webhook-id", "")
    ts = headers.get("webhook-timestamp", "")
    signed = f"{msg_id}.{ts}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [s.split(",", 1)[1] for s in headers.get("webhook-signature", "").split() if "," in s]
    fresh = abs(time.time() - int(ts or 0)) < 300
    return fresh and any(hmac.compare_digest(expected, o) for o in offered)


def make_handler(args):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def batch(self, body, elements):
            results = []
            for e in elements:
                answer = e["payload"].get("answer", "ok")
                with lock:
                    key = "element:" + str(e["id"])
                    seen[key] = seen.get(key, 0) + 1
                    first = seen[key] == 1
                if answer.startswith("status:4"):
                    results.append({"id": e["id"], "outcome": "terminal", "error": "refused\n"})
                elif answer.startswith("once:") and first:
                    results.append({"id": e["id"], "outcome": "retry", "error": "not yet"})
                elif answer.startswith("retry-after:") and first:
                    results.append({"id": e["id"], "outcome": "delay",
                                    "delay_ms": int(answer[12:]) * 1000})
                else:
                    results.append({"id": e["id"], "outcome": "ok"})
            record = {
                "body": body.decode("utf-8", "replace"),
                "verified": verify(args.secret, self.headers, body),
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "batch": len(elements),
                "answer": "batch",
                "results": results,
            }
            with lock, open(args.record, "a") as f:
                f.write(json.dumps(record) + "\n")
            data = json.dumps({"results": results}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def client_gone(self):
            """Whether the client closed its end (e.g. its process was killed) while we waited:
            it sends nothing while it waits for an answer, so readable means EOF or a reset."""
            if isinstance(self.connection, ssl.SSLSocket):
                return False  # not checked over TLS (no MSG_PEEK there)
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                doc = json.loads(body)
            except Exception:
                doc = {}
            if isinstance(doc, list):
                return self.batch(body, doc)
            answer = doc.get("answer", "ok") if isinstance(doc, dict) else "ok"
            msg_id = self.headers.get("webhook-id", "")
            with lock:
                seen[msg_id] = seen.get(msg_id, 0) + 1
                first = seen[msg_id] == 1
            record = {
                "path": self.path,
                "body": body.decode("utf-8", "replace"),
                "verified": verify(args.secret, self.headers, body),
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "answer": answer,
                "first": first,
            }
            status, extra, text = 200, {}, "ok"
            if answer.startswith("status:"):
                status, text = int(answer[7:]), "refused: " + msg_id + "\n\x01"
            elif answer.startswith("once:") and first:
                status, text = int(answer[5:]), "not yet"
            elif answer.startswith("retry-after:") and first:
                status, extra, text = 429, {"Retry-After": answer[12:]}, "slow down"
            elif answer == "drop-once" and first:
                record["dropped"] = True
                with lock, open(args.record, "a") as f:
                    f.write(json.dumps(record) + "\n")
                self.close_connection = True
                self.connection.shutdown(2)
                return
            elif answer.startswith("slow:"):
                time.sleep(int(answer[5:]) / 1000)
                if self.client_gone():
                    record["abandoned"] = True  # nobody to answer: not delivered
                    with lock, open(args.record, "a") as f:
                        f.write(json.dumps(record) + "\n")
                    self.close_connection = True
                    return
            record["status"] = status
            with lock, open(args.record, "a") as f:
                f.write(json.dumps(record) + "\n")
            data = text.encode()
            self.send_response(status)
            for k, v in extra.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_PUT = do_POST

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--secret", default="")
    p.add_argument("--tls-cert", default="")
    p.add_argument("--tls-key", default="")
    p.add_argument("--tls-client-ca", default="")
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args))
    server.daemon_threads = True
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:  # mutual TLS: a client without a certificate of this CA is refused
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(args.tls_client_ca)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print("listening", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
