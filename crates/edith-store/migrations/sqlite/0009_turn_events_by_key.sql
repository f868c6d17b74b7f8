-- Turn events are only ever read and written by their key (turn, seq). Kept in that key's own
-- b-tree (WITHOUT ROWID), an appended event is one b-tree insert instead of two: the table's
-- and its primary key's index. The events a data dir already holds are copied over unchanged.
CREATE TABLE turn_events_by_key (
    turn_id TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
) WITHOUT ROWID;
INSERT INTO turn_events_by_key (turn_id, seq, at, body)
    SELECT turn_id, seq, at, body FROM turn_events;
DROP TABLE turn_events;
ALTER TABLE turn_events_by_key RENAME TO turn_events;
