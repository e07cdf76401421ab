#!/usr/bin/env python3
"""A scripted OpenAI Responses API server (SSE), for running the real Codex offline.

    openai_responses.py --script SCRIPT.json --log LOG.jsonl --port-file PORT

Listens on 127.0.0.1 (an ephemeral port, written to PORT once listening) and answers every
`POST .../responses` with a stream of Server-Sent Events, as api.openai.com does:
`response.created`, then either one shell tool call or the final assistant message, then
`response.completed`. SCRIPT is `{"commands": ["echo one", ...], "final": "done"}`, a
command being a string or `{"cmd": ..., "tty": true, ...}` (more `exec_command` arguments); the
answer to a request is chosen by how many tool results (`function_call_output` items) its
input holds already, so request N gets command N, and a request that carries every result
gets the final message. Stateless: a retried request gets the same answer.

The shell tool is whichever one the request offers: `exec_command {"cmd": ...}` (Codex 0.171
with unified exec), `shell_command {"command": ...}` or `shell {"command": ["bash", "-lc",
...]}`. Call ids are `call_1`, `call_2`, ...

Every request is appended to LOG as one JSON line `{"method", "path", "body"}` (the body
parsed when it is JSON), flushed at once, so a test reads what the agent sent: the tool
results in `body.input`. Anything but a responses POST gets 404 and is logged too.
"""

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def shell_call(tools, call_id, step):
    """The call for one step: a command, or `{"cmd": ..., other exec_command arguments}`."""
    extra = dict(step) if isinstance(step, dict) else {"cmd": step}
    command = extra.pop("cmd")
    names = {tool.get("name") for tool in tools if isinstance(tool, dict)}
    if "exec_command" in names:
        name, arguments = "exec_command", dict(extra, cmd=command)
    elif "shell_command" in names:
        name, arguments = "shell_command", {"command": command}
    else:
        name, arguments = "shell", {"command": ["bash", "-lc", command]}
    return {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }


def tool_results(body):
    items = body.get("input") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return 0
    return sum(
        1
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    )


def answer(script, body):
    """The SSE events (type, data) for one request."""
    done = tool_results(body)
    response_id = "resp_%d" % (done + 1)
    events = [("response.created", {"type": "response.created", "response": {"id": response_id}})]
    commands = script.get("commands", [])
    if done < len(commands):
        item = shell_call(body.get("tools") or [], "call_%d" % (done + 1), commands[done])
    else:
        item = {
            "type": "message",
            "role": "assistant",
            "id": "msg_" + response_id,
            "content": [{"type": "output_text", "text": script.get("final", "done")}],
        }
    events.append(("response.output_item.done", {"type": "response.output_item.done", "item": item}))
    usage = {
        "input_tokens": 0,
        "input_tokens_details": None,
        "output_tokens": 0,
        "output_tokens_details": None,
        "total_tokens": 0,
    }
    events.append(
        (
            "response.completed",
            {"type": "response.completed", "response": {"id": response_id, "usage": usage}},
        )
    )
    return events


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-responses/1"

    def log_message(self, *_):
        pass

    def record(self, body):
        line = json.dumps({"method": self.command, "path": self.path, "body": body})
        with self.server.log_lock:
            self.server.log.write(line + "\n")
            self.server.log.flush()

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding", "").lower() == "zstd":
            return {"undecoded": "zstd", "bytes": len(raw)}
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def not_found(self, body):
        self.record(body)
        payload = b'{"error":{"message":"not scripted","type":"invalid_request_error"}}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self.not_found(None)

    def do_POST(self):
        body = self.read_body()
        if not self.path.split("?")[0].endswith("/responses") or not isinstance(body, dict):
            self.not_found(body)
            return
        self.record(body)
        stream = "".join(
            "event: %s\ndata: %s\n\n" % (kind, json.dumps(data))
            for kind, data in answer(self.server.script, body)
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(stream)))
        self.end_headers()
        self.wfile.write(stream)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    with open(args.script) as f:
        script = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.script = script
    server.log = open(args.log, "a")
    server.log_lock = threading.Lock()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    # Renamed into place: a reader never sees half a number.
    os.rename(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
