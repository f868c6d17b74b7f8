-- A session runs one turn at a time. `insert_turn_if_idle` checks this in its insert; the
-- index makes the rule the database's own, as a backend running writers side by side
-- (PostgreSQL) could otherwise let two racing inserts through.
CREATE UNIQUE INDEX one_unfinished_turn_per_session ON turns(session_id)
    WHERE state IN ('queued', 'running', 'requires_action');
