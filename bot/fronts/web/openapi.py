"""The OpenAPI 3.1 description of the web door's API, served at /openapi.json (a test checks it
against the routes and the answers)."""

from __future__ import annotations

from typing import Any

from bot.fronts.web.asking import DebateIn
from bot.fronts.web.reading import DebateLine, DebateOut, ReviewOut
from bot.fronts.web.stopping import CancelOut


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR = _json(_ref("Error"), "refused: `error` says why and what to change")
ERRORS = {str(status): ERROR for status in (400, 401, 404, 409, 413, 415, 422, 429)}
ID = {"name": "debate_id", "in": "path", "required": True, "schema": {"type": "integer"}}


def _schemas() -> dict[str, Any]:
    schemas: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}},
        }
    }
    for model in (DebateIn, DebateOut, DebateLine, ReviewOut, CancelOut):
        found = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(found.pop("$defs", {}))
        schemas[model.__name__] = found
    return schemas


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "debatebot web API",
        "version": "1",
        "description": "Ask for debates and follow them. With DEBATEBOT_WEB_TOKEN set, every"
        " call sends `Authorization: Bearer <token>`.",
    },
    "components": {
        "schemas": _schemas(),
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
    "security": [{"bearer": []}],
    "paths": {
        "/api/debates": {
            "post": {
                "summary": "Ask for a debate",
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "maxLength": 200},
                        "description": "a retry with the same key returns the same debate",
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("DebateIn")}},
                },
                "responses": {
                    "201": _json(_ref("DebateOut"), "queued"),
                    "200": _json(_ref("DebateOut"), "already queued with this Idempotency-Key"),
                    **ERRORS,
                },
            },
            "get": {
                "summary": "The newest debates, with their outcome and cost",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "debates": {"type": "array", "items": _ref("DebateLine")}
                            },
                        },
                        "the list",
                    ),
                    "401": ERROR,
                },
            },
        },
        "/api/debates/{debate_id}": {
            "get": {
                "summary": "One debate: its state, turns, verdict and review",
                "parameters": [ID],
                "responses": {"200": _json(_ref("DebateOut"), "the debate"), **ERRORS},
            }
        },
        "/api/debates/{debate_id}/events": {
            "get": {
                "summary": "Follow a debate as server-sent events: `turn` per stored turn (id:"
                " its sequence number; Last-Event-ID resumes), then `end` with the debate",
                "parameters": [
                    ID,
                    {"name": "after", "in": "query", "schema": {"type": "integer"}},
                ],
                "responses": {
                    "200": {
                        "description": "the stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    **ERRORS,
                },
            }
        },
        "/api/debates/{debate_id}/review": {
            "post": {
                "summary": "Approve or reject an escalated verdict",
                "parameters": [ID],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["decision"],
                                "properties": {
                                    "decision": {"enum": ["approve", "reject"]},
                                    "note": {"type": "string", "maxLength": 2000},
                                },
                            }
                        }
                    },
                },
                "responses": {"200": _json(_ref("ReviewOut"), "recorded"), **ERRORS},
            }
        },
        "/api/debates/{debate_id}/cancel": {
            "post": {
                "summary": "Stop a queued or running debate (409 once it has finished)",
                "parameters": [ID],
                "responses": {"202": _json(_ref("CancelOut"), "asked to stop"), **ERRORS},
            }
        },
        "/api/debates/{debate_id}/audit": {
            "get": {
                "summary": "Verify the debate's audit chain and seal",
                "parameters": [ID],
                "responses": {"200": _json({"type": "object"}, "the check"), **ERRORS},
            }
        },
        "/api/debates/{debate_id}/export": {
            "get": {
                "summary": "The full record (`?format=receipt`: its signed receipt)",
                "parameters": [
                    ID,
                    {"name": "format", "in": "query", "schema": {"enum": ["record", "receipt"]}},
                ],
                "responses": {"200": _json({"type": "object"}, "the record"), **ERRORS},
            }
        },
    },
}
