"""Hooks for `scripts/schemathesis` (loaded through SCHEMATHESIS_HOOKS)."""

import uuid

import schemathesis


@schemathesis.hook
def map_headers(context, headers):
    # Each generated request gets an `Idempotency-Key` of its own, as a client's new request
    # does. Generated keys are short and repeat, and a repeated key with the same body is
    # answered with the first reply (by design; the control plane's own tests cover replays),
    # which the resource checks would take for a resource that vanished.
    if headers and "Idempotency-Key" in headers:
        headers["Idempotency-Key"] = str(uuid.uuid4())
    return headers
