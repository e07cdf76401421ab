#!/usr/bin/env python3
"""A scripted Anthropic Messages API (streaming SSE), for Claude Code. See scripted.py.

Claude Code sends its main loop as `POST /v1/messages?beta=true` with the Bash tool among
`tools`; each script step becomes a `Bash` tool_use. Requests without that tool (a title,
a quota probe) get a short text, `count_tokens` a fixed count.
"""
import itertools
import time

import scripted

_ids = itertools.count(1)


def _text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


class Anthropic(scripted.Wire):
    def tool_results(self, path, body):
        found = []
        for message in body.get("messages") or []:
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append({"output": _text_of(block.get("content")),
                                  "error": block.get("is_error")})
        return found

    def respond(self, handler, path, body, script, results):
        if "count_tokens" in path:
            scripted.send_json(handler, 200, {"input_tokens": 100})
            return None
        if not path.startswith("/v1/messages") or not isinstance(body, dict):
            scripted.send_json(handler, 404, {"type": "error", "error": {
                "type": "not_found_error", "message": f"no {path} here"}})
            return None
        model = body.get("model", "claude-test")
        tools = [t.get("name") for t in body.get("tools") or []]
        step = script.step(len(results)) if "Bash" in tools else None
        index = len(results) if step is not None else ("final" if "Bash" in tools else None)
        if step is None:
            if "Bash" in tools and script.final_delay:
                time.sleep(script.final_delay)
            text = script.final if "Bash" in tools else "ok"
            blocks = [("text", text)]
            stop = "end_turn"
        else:
            tool_input = {"command": step["command"],
                          "description": step.get("description", "run a command")}
            if step.get("timeout_ms"):
                tool_input["timeout"] = step["timeout_ms"]
            if step.get("background"):
                tool_input["run_in_background"] = True
            blocks = [("tool_use", tool_input)]
            stop = "tool_use"
        message_id = f"msg_{next(_ids):06d}"
        usage = {"input_tokens": 100, "output_tokens": 10,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            content = []
            for kind, value in blocks:
                if kind == "text":
                    content.append({"type": "text", "text": value})
                else:
                    content.append({"type": "tool_use", "id": f"toolu_{next(_ids):06d}",
                                    "name": "Bash", "input": value})
            scripted.send_json(handler, 200, {
                "id": message_id, "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": usage})
            return index
        events = [("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})]
        for i, (kind, value) in enumerate(blocks):
            if kind == "text":
                events.append(("content_block_start", {"type": "content_block_start",
                               "index": i, "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"type": "content_block_delta",
                               "index": i, "delta": {"type": "text_delta", "text": value}}))
            else:
                events.append(("content_block_start", {
                    "type": "content_block_start", "index": i, "content_block": {
                        "type": "tool_use", "id": f"toolu_{next(_ids):06d}",
                        "name": "Bash", "input": {}}}))
                events.append(("content_block_delta", {
                    "type": "content_block_delta", "index": i, "delta": {
                        "type": "input_json_delta",
                        "partial_json": scripted.json.dumps(value)}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}))
        events.append(("message_stop", {"type": "message_stop"}))
        scripted.sse(handler, events)
        return index


if __name__ == "__main__":
    scripted.serve(Anthropic(), "A scripted Anthropic Messages API for Claude Code.")
