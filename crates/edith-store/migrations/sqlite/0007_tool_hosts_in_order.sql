-- Tool hosts are listed (`GET /v1/tool-hosts`) in the order they were registered, by SQLite's
-- own `rowid`; PostgreSQL's migration adds that column. Nothing to change here.
SELECT 1;
