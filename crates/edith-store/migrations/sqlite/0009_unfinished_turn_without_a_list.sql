-- The partial index of 0005 again, its states compared one by one: SQLite evaluates an index's
-- condition for every row a statement writes, and for `IN` with more than two values it first
-- builds a throwaway index of the list, twice for each turn an `UPDATE` rewrites.
DROP INDEX one_unfinished_turn_per_session;
CREATE UNIQUE INDEX one_unfinished_turn_per_session ON turns(session_id)
    WHERE state = 'queued' OR state = 'running' OR state = 'requires_action';
