-- The same schema as migrations/sqlite, version for version (a test compares them). Resources
-- keep their full wire form in `body` (JSON text); the columns beside it are what queries
-- filter, order and join on. Secrets live in their own columns and never in `body`.
--
-- `rowid` stands in for SQLite's implicit row number: lists page and order by it, so one
-- query text serves both backends.

CREATE TABLE instances (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    body TEXT NOT NULL,
    -- Presented by the control plane to the runtime (HERMES_DASHBOARD_SESSION_TOKEN).
    runtime_token TEXT NOT NULL,
    -- Presented by the runtime to the control plane's MCP endpoint.
    mcp_token TEXT NOT NULL
);

CREATE TABLE jobs (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT PRIMARY KEY,
    instance_id TEXT NOT NULL,
    state TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX jobs_by_state ON jobs(state);

CREATE TABLE job_events (
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    at TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (job_id, seq)
);

CREATE TABLE profiles (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT PRIMARY KEY,
    instance_id TEXT NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
    native_name TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (instance_id, native_name)
);

CREATE TABLE tool_hosts (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    secret TEXT NOT NULL
);

CREATE TABLE tools (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    host_id TEXT NOT NULL REFERENCES tool_hosts(id),
    body TEXT NOT NULL
);

CREATE TABLE profile_tools (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    profile_id TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    tool_id TEXT NOT NULL REFERENCES tools(id) ON DELETE CASCADE,
    PRIMARY KEY (profile_id, tool_id)
);

CREATE TABLE sessions (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT PRIMARY KEY,
    profile_id TEXT NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
    body TEXT NOT NULL
);

CREATE TABLE turns (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    state TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX turns_by_session ON turns(session_id, state);

CREATE TABLE turn_events (
    turn_id TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    at TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
