"""Hooks for `scripts/schemathesis` (loaded through SCHEMATHESIS_HOOKS)."""

import time
import uuid

import requests
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


@schemathesis.hook
def after_call(context, case, response):
    # Deleting an instance is asynchronous: 202, and a job that stops its runtime and then
    # forgets it. Until the job ends the instance is still served (state `deleting`), which the
    # use-after-free check would take for a resource outliving its DELETE. The run follows the
    # job as a client does: its event stream, which ends when the job does (so no list of the
    # job's end states is kept here), read for at most about 30 s.
    if case.operation.method.upper() != "DELETE" or response.status_code != 202:
        return
    job = (response.json().get("job") or {}).get("id")
    if not job:
        return
    url = response.request.url.split("/v1/", 1)[0] + f"/v1/jobs/{job}/events"
    headers = {"Authorization": response.request.headers.get("Authorization", "")}
    deadline = time.monotonic() + 30
    try:
        with requests.get(url, headers=headers, stream=True, timeout=(5, 30)) as events:
            for _ in events.iter_lines():
                if time.monotonic() > deadline:
                    return
    except requests.RequestException:
        # A job still running after the bound, or a stream cut short: the run goes on.
        return
