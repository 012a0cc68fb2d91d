"""Schemathesis hooks for the service's run (test/schemathesis/schemathesis.test.ts).

Two rules of the service hold for every value at any depth of a body, free-form objects included, and so cannot be
written into the schema of each field:
- I-JSON (RFC 7493, README "Limits"): strings without U+0000 or lone surrogates, numbers within the 64-bit float
  range and at most 100 characters, nesting at most 32 levels; and no `__proto__` key, nor a `constructor` key
  holding a `prototype` (refused as prototype pollution);
- an event's own time lies between 7 days before the request and 5 minutes after it, a bound relative to the moment
  of the request.
A schema-valid body (positive mode) is brought within them before it is sent; everything else about it is as
generated. Negative bodies are left alone, so they are still sent as generated and must still be refused.
"""
from datetime import datetime, timezone

import schemathesis
from schemathesis.core.parameters import ParameterLocation

MAX_DEPTH = 32


def _storable_text(text):
    return "".join(c for c in text if c != "\x00" and not 0xD800 <= ord(c) <= 0xDFFF)


def _storable(node, depth, now):
    if isinstance(node, dict):
        if depth >= MAX_DEPTH:
            return {}
        out = {}
        for key, value in node.items():
            if key == "__proto__" or (key == "constructor" and isinstance(value, dict) and "prototype" in value):
                continue
            out[_storable_text(key)] = now if key == "event_time" and now else _storable(value, depth + 1, now)
        return out
    if isinstance(node, list):
        return [] if depth >= MAX_DEPTH else [_storable(item, depth + 1, now) for item in node]
    if isinstance(node, str):
        return _storable_text(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int) and len(str(node)) > 100:
        return 0
    return node


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.meta is None or case.meta.is_negative_at(ParameterLocation.BODY) or not isinstance(case.body, (dict, list)):
        return
    ingestion = case.path in ("/v1/events", "/v1/sgtm")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if ingestion else None
    case.body = _storable(case.body, 1, now)
