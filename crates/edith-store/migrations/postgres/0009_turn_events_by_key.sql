-- On SQLite this version keeps turn events in their key's own b-tree (WITHOUT ROWID). A
-- PostgreSQL table has no rowid to drop: nothing to change here, the version is kept in step.
SELECT 1;
