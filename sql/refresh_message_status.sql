-- Re-evaluate every message's status at a new as_of (semantics rule 23) without
-- recomputing correlations: statuses move only with time once correlations are known.
UPDATE {target}
SET status = {status}, as_of = {as_of}
WHERE as_of IS DISTINCT FROM {as_of}
