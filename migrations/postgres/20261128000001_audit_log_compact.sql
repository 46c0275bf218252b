-- SQLite's audit table moves to an integer time and a 16-byte id keyed by (time, id) in the
-- migration of this name (issue 31). Postgres already stores both natively (timestamptz and
-- uuid, 8 and 16 bytes), and a Postgres commit's cost is its WAL flush, not the row: its table
-- stays as it is. This file keeps the two directories in lockstep.
SELECT 1;
