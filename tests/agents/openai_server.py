#!/usr/bin/env python3
"""A scripted OpenAI Responses API (streaming SSE), for Codex. See scripted.py.

Codex sends `POST /v1/responses` with its tools; each script step becomes a call of its
shell tool: `exec_command {"cmd"}` (what Codex 0.171 offers), else `shell_command
{"command"}`. Results come back as `function_call_output` items in `input`.
"""
import itertools
import json

import scripted

_ids = itertools.count(1)


def _text_of(output):
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return _text_of(output.get("content") or output.get("output") or "")
    if isinstance(output, list):
        return "".join(i.get("text", "") for i in output if isinstance(i, dict))
    return ""


def _tool_names(body):
    names = []
    for tool in body.get("tools") or []:
        names.append(tool.get("name") or (tool.get("function") or {}).get("name"))
    return names


class Responses(scripted.Wire):
    def tool_results(self, path, body):
        found = []
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") in (
                    "function_call_output", "custom_tool_call_output"):
                output = item.get("output")
                error = output.get("success") is False if isinstance(output, dict) else None
                found.append({"output": _text_of(output), "error": error})
        return found

    def respond(self, handler, path, body, script, results):
        if not path.startswith("/v1/responses") or not isinstance(body, dict):
            scripted.send_json(handler, 404, {"error": {"message": f"no {path} here"}})
            return None
        names = _tool_names(body)
        shell = next((n for n in ("exec_command", "shell_command") if n in names), None)
        step = script.step(len(results)) if shell else None
        index = len(results) if step is not None else ("final" if shell else None)
        response_id = f"resp_{next(_ids):06d}"
        if step is None:
            item = {"type": "message", "role": "assistant", "id": f"msg_{next(_ids):06d}",
                    "content": [{"type": "output_text", "text": script.final if shell else "ok",
                                 "annotations": []}]}
        else:
            if shell == "exec_command":
                arguments = {"cmd": step["command"]}
                if step.get("timeout_ms"):
                    arguments["yield_time_ms"] = step["timeout_ms"]
                if step.get("shell"):
                    arguments["shell"] = step["shell"]
            else:
                arguments = {"command": step["command"]}
                if step.get("timeout_ms"):
                    arguments["timeout_ms"] = step["timeout_ms"]
            item = {"type": "function_call", "id": f"fc_{next(_ids):06d}",
                    "call_id": f"call_{next(_ids):06d}", "name": shell,
                    "arguments": json.dumps(arguments)}
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 110}
        scripted.sse(handler, [
            ("response.created", {"type": "response.created",
                                  "response": {"id": response_id}}),
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {
                "id": response_id, "usage": usage}}),
        ])
        return index


if __name__ == "__main__":
    scripted.serve(Responses(), "A scripted OpenAI Responses API for Codex.")
