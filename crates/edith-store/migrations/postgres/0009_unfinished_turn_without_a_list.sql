-- SQLite's 0009 writes this index's condition as comparisons (see there); PostgreSQL reads a
-- list in place, and makes the index the same way so that both backends hold one definition.
DROP INDEX one_unfinished_turn_per_session;
CREATE UNIQUE INDEX one_unfinished_turn_per_session ON turns(session_id)
    WHERE state = 'queued' OR state = 'running' OR state = 'requires_action';
