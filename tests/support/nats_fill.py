#!/usr/bin/env python3
"""Fills a nats-server's JetStream store, or frees it: the store-full fault.

    nats_fill.py HOST PORT fill    a stream FLEETCRON_FILLER takes every byte
                                   the server's max_file_store leaves: 4 KiB
                                   messages until JetStream refuses one, then
                                   512 and 64 bytes
    nats_fill.py HOST PORT free    deletes that stream

Speaks the NATS client protocol over one socket (Debian packages no NATS
client for scripts): the JetStream API is request and reply on $JS.API
subjects. Prints what it did on one line; exits 1 if the server refused
something it should not have (the stream's creation, its deletion) or
never refused a message (a store that cannot fill).
"""
import json
import socket
import sys

STREAM = "FLEETCRON_FILLER"
INBOX = "_INBOX.fleetcron-fill"
MAX_MESSAGES = 100_000  # 400 MB: far above any store the tests give the server


class Client:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.buffer = b""
        self.line()  # INFO
        self.send(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\n')
        self.send(f"SUB {INBOX}.* 1\r\n".encode())

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def exact(self, size):
        while len(self.buffer) < size + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:size], self.buffer[size + 2:]
        return data

    def request(self, subject, payload, n):
        reply = f"{INBOX}.{n}"
        self.send(f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n")
        while True:
            line = self.line()
            if line == b"PING":
                self.send(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                parts = line.split()
                data = self.exact(int(parts[-1]))
                if parts[1].decode() == reply:
                    return json.loads(data)
            elif line.startswith(b"-ERR"):
                raise RuntimeError(line.decode())


def main():
    host, port, action = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    client = Client(host, port)
    if action == "free":
        answer = client.request(f"$JS.API.STREAM.DELETE.{STREAM}", b"", 0)
        if "error" in answer:
            sys.exit(f"nats_fill: deleting {STREAM}: {answer['error']}")
        print(f"deleted stream {STREAM}")
        return
    config = {"name": STREAM, "subjects": [f"{STREAM.lower()}.>"], "storage": "file"}
    answer = client.request(f"$JS.API.STREAM.CREATE.{STREAM}", json.dumps(config).encode(), 0)
    if "error" in answer:
        sys.exit(f"nats_fill: creating {STREAM}: {answer['error']}")
    n = 0
    stored = {}
    refusal = None
    for size in (4096, 512, 64):  # smaller and smaller, to the last bytes
        payload = b"x" * size
        stored[size] = 0
        while True:
            n += 1
            if n > MAX_MESSAGES:
                sys.exit(f"nats_fill: {MAX_MESSAGES} messages stored and the store is not full")
            answer = client.request(f"{STREAM.lower()}.fill", payload, n)
            if "error" in answer:
                refusal = answer["error"].get("description", answer["error"])
                break
            stored[size] += 1
    counts = ", ".join(f"{count} of {size} bytes" for size, count in stored.items())
    print(f"stream {STREAM}: {counts}, then: {refusal}")


if __name__ == "__main__":
    main()
