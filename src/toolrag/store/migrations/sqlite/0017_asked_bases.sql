-- What the operator's chat model was last asked about each subject with (everything the question read, hashed):
-- `relations` (a tool's proposed requirements) and `examples` (a tool view's written example requests). A run asks
-- again only where the basis changed, whatever the answer kept. The bases of proposals move here.
CREATE TABLE asked_bases (
    question TEXT NOT NULL,
    subject TEXT NOT NULL,
    basis TEXT NOT NULL,
    asked_at TEXT NOT NULL,
    PRIMARY KEY (question, subject)
);
INSERT INTO asked_bases(question, subject, basis, asked_at) SELECT 'relations', tool, basis, asked_at FROM proposal_bases;
DROP TABLE proposal_bases;
