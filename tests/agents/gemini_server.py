#!/usr/bin/env python3
"""A scripted Gemini API (`streamGenerateContent?alt=sse`), for Gemini CLI. See scripted.py.

Gemini CLI sends its main loop as `POST .../models/MODEL:streamGenerateContent?alt=sse` with
`run_shell_command` among its function declarations; each script step becomes a call of it.
Results come back as `functionResponse` parts. Before a turn it asks `:generateContent` for
a routing decision (a JSON text with `complexity_reasoning` and `complexity_score`); that and
any other one-shot call get a short answer.
"""
import json

import scripted

SHELL = "run_shell_command"


def _declared(body):
    names = []
    for tool in body.get("tools") or []:
        for decl in tool.get("functionDeclarations") or []:
            names.append(decl.get("name"))
    return names


def _output_of(response):
    if isinstance(response, dict):
        if isinstance(response.get("output"), str) and len(response) == 1:
            return response["output"]
        return json.dumps(response, sort_keys=True)
    return str(response)


class Gemini(scripted.Wire):
    def tool_results(self, path, body):
        found = []
        for content in body.get("contents") or []:
            for part in content.get("parts") or []:
                if isinstance(part, dict) and "functionResponse" in part:
                    response = part["functionResponse"].get("response")
                    error = "error" in response if isinstance(response, dict) else None
                    found.append({"output": _output_of(response), "error": error})
        return found

    def respond(self, handler, path, body, script, results):
        if not isinstance(body, dict) or "/models/" not in path:
            scripted.send_json(handler, 404, {"error": {"code": 404, "message": f"no {path}"}})
            return None
        usage = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}
        if ":generateContent" in path:
            text = "ok"
            if "complexity" in json.dumps(body):
                text = json.dumps({"complexity_reasoning": "a scripted test",
                                   "complexity_score": 10})
            scripted.send_json(handler, 200, {"candidates": [{
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP", "index": 0}], "usageMetadata": usage})
            return None
        if ":streamGenerateContent" not in path:
            scripted.send_json(handler, 404, {"error": {"code": 404, "message": f"no {path}"}})
            return None
        shell = SHELL in _declared(body)
        step = script.step(len(results)) if shell else None
        index = len(results) if step is not None else ("final" if shell else None)
        if step is None:
            part = {"text": script.final if shell else "ok"}
        else:
            args = {"command": step["command"],
                    "description": step.get("description", "run a command")}
            if step.get("background"):
                args["is_background"] = True
            part = {"functionCall": {"name": SHELL, "args": args}}
        scripted.sse(handler, [(None, {"candidates": [{
            "content": {"role": "model", "parts": [part]},
            "finishReason": "STOP", "index": 0}], "usageMetadata": usage})])
        return index


if __name__ == "__main__":
    scripted.serve(Gemini(), "A scripted Gemini API for Gemini CLI.")
