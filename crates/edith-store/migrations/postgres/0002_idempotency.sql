-- Replies to POSTs sent with an Idempotency-Key, so a retry gets the first reply instead of
-- doing the work twice. `status` is NULL while the first request is still being handled.
CREATE TABLE idempotency (
    key TEXT PRIMARY KEY,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    request_body BYTEA NOT NULL,
    status BIGINT,
    response_body BYTEA,
    content_type TEXT,
    created_at TEXT NOT NULL
);
