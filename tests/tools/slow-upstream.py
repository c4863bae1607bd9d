#!/usr/bin/env python3
"""A slow HTTP/1.1 upstream on loopback, for the caddy reverse-proxy test of `--why`
(tests/unit/test_runtime_real_why.cpp) and the tutorial "Why is this call slow?"
(docs/tutorials/08-why-slow.md).

usage: slow-upstream.py HOST:PORT DELAY_MS [BODY_DELAY_MS]

Every GET is answered 200 with the body "slow upstream\\n", DELAY_MS after the request was
read; each request on a thread of its own, connections kept alive. The response goes out
in one write: the headers in one segment and the body in another would meet Nagle's
algorithm on this side and delayed ACKs on the client's, which adds up to 40 ms to some
responses. With BODY_DELAY_MS the headers go out after DELAY_MS and the body that much
later, in a second write (a response that streams its body).

Prints "listening on HOST:PORT" once it accepts connections, then one line per response:
"answered PATH". Runs until killed.
"""

import http.server
import sys
import time

BODY = b"slow upstream\n"


def main():
    if len(sys.argv) not in (3, 4) or ":" not in sys.argv[1]:
        print("usage: slow-upstream.py HOST:PORT DELAY_MS [BODY_DELAY_MS]", file=sys.stderr)
        return 2
    host, port = sys.argv[1].rsplit(":", 1)
    delay = int(sys.argv[2]) / 1000
    body_delay = int(sys.argv[3]) / 1000 if len(sys.argv) == 4 else None

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            time.sleep(delay)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % (
                len(BODY))
            if body_delay is None:
                self.wfile.write(head + BODY)
            else:
                self.wfile.write(head)
                time.sleep(body_delay)
                self.wfile.write(BODY)
            print("answered", self.path, flush=True)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    print(f"listening on {host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
