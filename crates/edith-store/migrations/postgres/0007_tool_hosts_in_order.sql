-- Tool hosts are listed (`GET /v1/tool-hosts`) in the order they were registered, a page at a
-- time, as tools are: the order needs a column of its own (SQLite has `rowid`).
ALTER TABLE tool_hosts ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE;
