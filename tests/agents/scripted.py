"""The part every scripted model server shares: the script, the HTTP server, the log.

A script is JSON, the same for every wire API:

    {"steps": [{"command": "echo hi", "description": "say hi",
                "background": false, "timeout_ms": 120000}, ...],
     "final": "All done.", "final_delay_ms": 8000}

Each step is one call of the agent's shell tool (`background` and `timeout_ms` are optional
and only passed on where the agent's tool has such a field). The server answers a request
that carries N tool results with step N, and once every step has its result, with the final
text. So the agent drives the pace, and a retried request gets the same answer. The final
text comes `final_delay_ms` after the request (default at once): a model slow to answer.

Every request is logged as one JSON line: {"path", "step", "tool_results", "body"}, where
`step` is the index of the step answered, "final" for the final text, null for a request
outside the agent's main loop, and `tool_results` are the results found in that request,
oldest first, each as {"output": text, "error": flag or null}. The last main-loop request of a
run holds them all. Each line also has "received" and "answered", the wall-clock times (Unix
seconds) the request came and its answer was sent.

Usage (by each server's main): SERVER --script FILE --log FILE [--port-file FILE]
Listens on 127.0.0.1, port 0; prints the port on stdout and writes it to --port-file.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Script:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        self.steps = data["steps"]
        self.final = data.get("final", "Done.")
        self.final_delay = data.get("final_delay_ms", 0) / 1000.0

    def step(self, results_seen):
        """The step to answer with after `results_seen` tool results, or None: the end."""
        if results_seen < len(self.steps):
            return self.steps[results_seen]
        return None


class Wire:
    """What each wire API defines (see anthropic_server.py, openai_server.py, gemini_server.py)."""

    def tool_results(self, path, body):
        """The tool results in this request, oldest first: [{"output", "error"}]."""
        raise NotImplementedError

    def respond(self, handler, path, body, script, results):
        """Writes the whole HTTP response; returns the step index answered, "final", or None."""
        raise NotImplementedError


def sse(handler, events):
    """Sends a complete SSE response of (event name or None, JSON data) pairs."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        chunk = ""
        if name is not None:
            chunk += f"event: {name}\n"
        chunk += f"data: {json.dumps(data)}\n\n"
        handler.wfile.write(chunk.encode())
    handler.wfile.flush()
    handler.close_connection = True


def send_json(handler, status, data):
    payload = json.dumps(data).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def serve(wire, description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--script", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--port-file")
    args = parser.parse_args()
    script = Script(args.script)
    log_lock = threading.Lock()
    log = open(args.log, "a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return {"unparsed": raw.decode("utf-8", "replace")}

        def _handle(self):
            received = time.time()
            body = self._body() if self.command == "POST" else None
            results = wire.tool_results(self.path, body) if isinstance(body, dict) else []
            step = wire.respond(self, self.path, body, script, results)
            with log_lock:
                entry = {"method": self.command, "path": self.path, "step": step,
                         "tool_results": results, "body": body,
                         "received": received, "answered": time.time()}
                log.write(json.dumps(entry) + "\n")
                log.flush()

        def do_POST(self):
            self._handle()

        def do_GET(self):
            self._handle()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        import os
        os.rename(args.port_file + ".tmp", args.port_file)
    print(port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
