-- Relations between tools learned from the usage log (search/learned.py), per learner: `tenant:NAME`, or
-- `caller:ID` for a caller of no tenant. Replaced whole for a learner by each run that learned for it.
CREATE TABLE IF NOT EXISTS learned_relations (
    learner TEXT NOT NULL,
    tool TEXT NOT NULL,
    related TEXT NOT NULL,
    strength DOUBLE PRECISION NOT NULL,
    support INTEGER NOT NULL,
    sessions INTEGER NOT NULL,
    learned_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (learner, tool, related)
);
-- An admin's verdict on an inferred or learned relation: `confirmed` (as strong as declared, kept across
-- re-inference) or `rejected` (never inferred nor learned again for the pair until lifted).
CREATE TABLE IF NOT EXISTS relation_verdicts (
    tool TEXT NOT NULL,
    other TEXT NOT NULL,
    kind TEXT NOT NULL,
    verdict TEXT NOT NULL,
    parameter TEXT,
    decided_by TEXT,
    decided_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tool, other, kind)
);
