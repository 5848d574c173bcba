"""A loopback HTTP receiver for the notification tests: answers every
request 200 (or 500 for the first --fail-first), and appends one JSON line
per request ({"method","path","body"}) to LOG. Writes its port to PORT_FILE.

Usage: http_receiver.py PORT_FILE LOG [--fail-first N]
"""
import http.server
import json
import sys
import threading

port_file, log_path = sys.argv[1], sys.argv[2]
fail_first = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--fail-first" else 0
lock = threading.Lock()
seen = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def handle_one(self):
        global seen
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        with lock:
            seen += 1
            failing = seen <= fail_first
            with open(log_path, "a") as log:
                log.write(json.dumps({"method": self.command, "path": self.path, "body": body,
                                      "answered": 500 if failing else 200}) + "\n")
        self.send_response(500 if failing else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = handle_one
    do_GET = handle_one

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
