-- Requirements a chat model proposed (`toolrag relations propose`, runtime/propose.py): unused by search until an
-- admin confirms them (a `confirmed` verdict) or the registry accepts proposals; a rejected pair is not proposed again.
CREATE TABLE proposed_relations (
    tool TEXT NOT NULL,
    other TEXT NOT NULL,
    parameter TEXT,
    reason TEXT NOT NULL,
    model TEXT NOT NULL,
    proposed_at TEXT NOT NULL,
    PRIMARY KEY (tool, other)
);
-- What each tool was last asked with (its card, its candidate neighbours, the model and the prompt, hashed): a run
-- asks again only about tools whose basis changed.
CREATE TABLE proposal_bases (
    tool TEXT PRIMARY KEY,
    basis TEXT NOT NULL,
    asked_at TEXT NOT NULL
);
