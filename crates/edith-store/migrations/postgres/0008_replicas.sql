-- Several control-plane replicas share one database (in practice PostgreSQL; on SQLite there
-- is one). Each says it is alive until `alive_until` (unix milliseconds) and renews that while
-- it runs; `url` is where the others forward what only it can answer.
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    alive_until BIGINT NOT NULL
);
-- The replica that runs an instance's runtime and holds its gateway link, until when.
ALTER TABLE instances ADD COLUMN owner TEXT;
ALTER TABLE instances ADD COLUMN owner_until BIGINT;
-- The replica driving a turn: when it dies, another ends the turn instead of waiting for it.
ALTER TABLE turns ADD COLUMN driver TEXT;
