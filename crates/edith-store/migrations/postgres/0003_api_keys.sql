-- API keys. Only a hash of each secret is kept (`hash`, SHA-256 of the whole secret); `body`
-- is the key as the API shows it.
CREATE TABLE api_keys (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    id TEXT PRIMARY KEY,
    hash BYTEA NOT NULL UNIQUE,
    body TEXT NOT NULL
);
