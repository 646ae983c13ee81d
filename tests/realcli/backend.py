"""A fake Copilot backend on 127.0.0.1, enough for the real CLI to run fusion turns offline.

The CLI is pointed here for everything (its API URLs, and every proxy variable), so it
never needs a real account and any call it makes elsewhere shows up in `requests` instead
of leaving the machine: CONNECT, which a proxied https request starts with, is refused.

What a request is answered with depends on the scenario the driver set (`use`):
`POST /model/fusion` returns the scenario's routing plan (or an error status, for a route
failure), and `POST /chat/completions` streams an OpenAI-style answer whose shape depends
on what the CLI asked. The CLI's prompts tell a cascade judge and a critic from a solver;
a solver's first call may ask for the `bash` tool when the scenario wants one.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FUSION_MODELS = (
    "gpt-5.6-sol", "gpt-5.6-luna", "gpt-5.6-terra", "claude-sonnet-5", "claude-opus-5",
    "mai-code-1.1-flash",
)
# Every answer a model gives here. The tests assert that none of it survives a scrub.
ANSWER_TEXT = "REALCLI-CANARY answer text"
TOOL_COMMAND = "echo REALCLI-CANARY-tool-output"


@dataclass(frozen=True)
class Step:
    """One step of a routing plan, as the plan service names it on the wire."""

    role: str  # generation | draft | escalation | repair | critic | revision
    model: str
    reasoning_effort: str = "medium"


@dataclass(frozen=True)
class Plan:
    """What the fake answers for one scenario."""

    pattern: str | None  # solo | cascade | critique; None: no fusion asked for
    steps: tuple[Step, ...] = ()
    route_status: int = 200  # not 200: the plan service fails and the CLI falls back
    tool_model: str | None = None  # this model's first call of a leg asks for the bash tool
    judge_score: int = 5  # >= 4 accepts
    critic_assessment: str = "approve"  # approve | revise
    judge_status: int = 200  # not 200: every call of the judge fails, and the turn degrades
    # Models whose answers carry no `copilot_usage`: the CLI then has no credits for them.
    unpriced: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """One request the fake saw: enough to check the traffic, no bodies."""

    method: str
    path: str
    session_id: str | None = None
    model: str | None = None
    answer: str | None = None  # how a chat completion was answered


NO_FUSION = Plan(None)


class FakeCopilot:
    """The server, on an ephemeral loopback port, in a daemon thread.

    Plans are kept per session (the CLI sends its session id with every call), so runs of
    different scenarios may overlap.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._plans: dict[str, Plan] = {}
        self._requests: list[Request] = []
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.fake = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeCopilot:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def use(self, session_id: str, plan: Plan) -> None:
        """Answer this session's next calls by `plan`."""
        with self._lock:
            self._plans[session_id] = plan

    def plan_for(self, session_id: str | None) -> Plan:
        with self._lock:
            return self._plans.get(session_id or "", NO_FUSION)

    def record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # the CLI drops connections it no longer needs; that is no error of ours


def model_entry(model_id: str) -> dict:
    vendor = "Anthropic" if model_id.startswith("claude") else (
        "Microsoft" if model_id.startswith("mai") else "OpenAI")
    return {
        "id": model_id, "name": model_id, "version": model_id, "vendor": vendor,
        "object": "model", "preview": False, "model_picker_enabled": True,
        "capabilities": {
            "family": model_id, "type": "chat", "object": "model_capabilities",
            "tokenizer": "o200k_base",
            "limits": {"max_context_window_tokens": 200000, "max_output_tokens": 32000,
                       "max_prompt_tokens": 168000},
            "supports": {"streaming": True, "tool_calls": True, "parallel_tool_calls": True,
                         "structured_outputs": True, "vision": False},
        },
        "policy": {"state": "enabled", "terms": ""},
        "supported_endpoints": ["/chat/completions"],
    }


def catalog() -> list[dict]:
    return [model_entry(model) for model in FUSION_MODELS]


def _tiers() -> list[dict]:
    return [
        {"id": "auto", "display_name": "Auto", "description": "auto", "type": "auto",
         "status": {"enabled": True}},
        {"id": "hydrafusion", "display_name": "HydraFusion", "description": "fusion",
         "type": "fusion", "status": {"enabled": True}},
        {"id": "hydrafusion-max", "display_name": "HydraFusion Max", "description": "fusion",
         "type": "fusion", "status": {"enabled": True}},
    ]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeCopilot/1"

    @property
    def fake(self) -> FakeCopilot:
        return self.server.fake

    def log_message(self, format, *args) -> None:
        pass  # every request is in fake.requests; stderr stays quiet

    def do_CONNECT(self) -> None:
        self._record()
        self._send(403, {"error": "no outbound traffic"})

    def do_GET(self) -> None:
        path = self._record()
        base = self.fake.url
        endpoints = {"api": base, "proxy": base, "telemetry": base, "origin-tracker": base}
        if path.endswith("/copilot_internal/user"):
            self._send(200, {
                "login": "realcli-test", "chat_enabled": True, "copilot_plan": "enterprise",
                "access_type_sku": "copilot_enterprise_seat", "analytics_tracking_id": "0",
                "endpoints": endpoints, "organization_login_list": [],
                "can_signup_for_limited": False,
            })
        elif path.endswith("/copilot_internal/v2/token"):
            now = int(time.time())
            self._send(200, {
                "token": f"tid=realcli;exp={now + 3600}", "expires_at": now + 3600,
                "refresh_in": 1500, "endpoints": endpoints, "chat_enabled": True,
                "sku": "copilot_enterprise_seat",
            })
        elif path.endswith("/models"):
            # Versions before fusion became an auto tier take it as a model of the catalog.
            synthetic = [model_entry(tier["id"]) for tier in _tiers() if tier["type"] == "fusion"]
            self._send(200, {"data": catalog() + synthetic, "object": "list"})
        elif path.endswith("/meta"):
            # `models` is the /models answer as it is; the default tier must be of type auto.
            self._send(200, {"models": {"data": catalog()}, "auto": {
                "default_tier": "auto", "tiers": _tiers()}})
        else:
            self._send(404, {"error": "not here"})

    def do_POST(self) -> None:
        body = self._body()
        plan = self.fake.plan_for(self.headers.get("x-client-session-id"))
        if self.path.startswith("/model/fusion"):
            self._record()
            self._route(plan, body.get("fusion_mode"))
        elif self.path.startswith("/chat/completions"):
            model = body.get("model") if isinstance(body.get("model"), str) else "unknown"
            answer = _answer_kind(body, plan)
            self._record(model, answer)
            if answer == "judge" and plan.judge_status != 200:
                self._send(plan.judge_status, {"error": {"message": "judge unavailable"}})
            elif body.get("stream"):
                self._stream(_chunks(model, answer, body, plan))
            else:
                self._send(200, _completion(model, answer, body, plan))
        else:
            self._record()
            self._send(200, {})

    def _record(self, model: str | None = None, answer: str | None = None) -> str:
        path = self.path.split("?")[0].rstrip("/")
        self.fake.record(Request(self.command, path, self.headers.get("x-client-session-id"),
                                 model, answer))
        return path

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def _route(self, plan: Plan, fusion_mode: object) -> None:
        """The plan must name the synthetic model the CLI asked for (its `fusion_mode`)."""
        if plan.route_status != 200 or plan.pattern is None:
            self._send(plan.route_status if plan.route_status != 200 else 503,
                       {"error": "plan service unavailable"})
            return
        self._send(200, {
            "fusion_mode": fusion_mode, "fusion_pattern": plan.pattern, "plan_version": "2",
            "policy_version": "realcli-1", "matched_rule": "realcli-rule",
            "selected_rule": "realcli-rule",
            "steps": [{"role": step.role, "model_id": step.model,
                       "reasoning_effort": step.reasoning_effort} for step in plan.steps],
            "session": {"token": "realcli-fusion-session", "expires_at": int(time.time()) + 3600},
        })

    def _stream(self, chunks: list[dict]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _send(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _texts(body: dict) -> tuple[str, list[dict]]:
    """The request's system text and its messages."""
    messages = body.get("messages")
    messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    system = " ".join(_content(m) for m in messages if m.get("role") == "system")
    return system, messages


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _answer_kind(body: dict, plan: Plan) -> str:
    """judge | critic | tool_call | text: what this call of the CLI wants."""
    system, messages = _texts(body)
    if system.startswith("You are the read-only judge in a HydraFusion Cascade"):
        return "judge"
    if '"assessment"' in system:
        return "critic"
    has_tool_result = any(m.get("role") == "tool" for m in messages)
    if body.get("model") == plan.tool_model and not has_tool_result and _bash_tool(body) is not None:
        return "tool_call"
    return "text"


def _bash_tool(body: dict) -> dict | None:
    """The declaration of the shell tool among the request's tools (some are not functions)."""
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == "bash":
            return function
    return None


@dataclass(frozen=True)
class _Reply:
    """What a model says: text, or one call of the bash tool."""

    content: str | None
    tool_call: dict | None = None


def _reply(kind: str, body: dict, plan: Plan) -> _Reply:
    if kind == "tool_call":
        return _Reply(None, {
            "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps(_bash_arguments(body))},
        })
    if kind == "judge":
        return _Reply(json.dumps({"score": plan.judge_score, "rationale": ANSWER_TEXT}))
    if kind == "critic":
        # A revision must name a defect, or the CLI takes the critique as invalid.
        defect = None if plan.critic_assessment == "approve" else {
            "target": "explicit task requirement", "evidence": ANSWER_TEXT}
        return _Reply(json.dumps({"assessment": plan.critic_assessment,
                                  "feedback": ANSWER_TEXT, "defect": defect}))
    return _Reply(ANSWER_TEXT)


# Fixed figures per call, so a test can check the CLI's sums: tokens, and credits (in
# nano-AIU, as the API's `copilot_usage` gives them) that differ by model.
USAGE = {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
         "prompt_tokens_details": {"cached_tokens": 200}}


def nano_aiu(model: str) -> int:
    return (FUSION_MODELS.index(model) + 1) * 250_000_000 if model in FUSION_MODELS else 0


def _copilot_usage(model: str) -> dict:
    return {"total_nano_aiu": nano_aiu(model), "token_details": [
        {"batch_size": 1, "cost_per_batch": 1, "token_count": 1200, "token_type": "input"},
        {"batch_size": 1, "cost_per_batch": 1, "token_count": 40, "token_type": "output"}]}


def _billing(model: str, plan: Plan) -> dict:
    """The `copilot_usage` member of an answer, none for the plan's unpriced models."""
    return {} if model in plan.unpriced else {"copilot_usage": _copilot_usage(model)}


def _completion(model: str, kind: str, body: dict, plan: Plan) -> dict:
    """A whole chat completion, for a call that did not ask for a stream."""
    reply = _reply(kind, body, plan)
    message = {"role": "assistant", "content": reply.content}
    if reply.tool_call:
        message["tool_calls"] = [reply.tool_call]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
        "created": int(time.time()), "model": model, "usage": USAGE,
        **_billing(model, plan),
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if reply.tool_call else "stop"}],
    }


def _chunks(model: str, kind: str, body: dict, plan: Plan) -> list[dict]:
    """The SSE chunks of one streamed chat completion."""
    reply = _reply(kind, body, plan)
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    created = int(time.time())

    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> dict:
        out = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
               "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            out["usage"] = usage
            out.update(_billing(model, plan))
        return out

    if reply.tool_call:
        delta = {"role": "assistant", "content": None,
                 "tool_calls": [{"index": 0, **reply.tool_call}]}
        return [chunk(delta), chunk({}, "tool_calls", USAGE)]
    return [chunk({"role": "assistant", "content": reply.content}), chunk({}, "stop", USAGE)]


def _bash_arguments(body: dict) -> dict:
    """Arguments the CLI's bash tool accepts: a value for every property it requires."""
    params = (_bash_tool(body) or {}).get("parameters") or {}
    properties = params.get("properties") or {}
    arguments = {"command": TOOL_COMMAND}
    for name in params.get("required") or ():
        spec = properties.get(name) or {}
        if name in arguments:
            continue
        if spec.get("enum"):
            arguments[name] = spec["enum"][0]
        elif spec.get("type") == "boolean":
            arguments[name] = False
        elif spec.get("type") in ("number", "integer"):
            arguments[name] = spec.get("minimum", 30)
        else:
            arguments[name] = "realcli"
    return arguments
