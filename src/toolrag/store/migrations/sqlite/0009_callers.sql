-- The identity of the caller behind each record (`Principal.caller`, access/policy.py): a reader without a tenant
-- sees its own records, told apart by identity rather than by label (a token whose subject is "admin" is not the
-- rule named "admin"), and learned usage is kept per caller. Records written before are shown to operators only.
ALTER TABLE retrievals ADD COLUMN caller TEXT;
ALTER TABLE calls ADD COLUMN caller TEXT;
CREATE INDEX retrievals_caller_at ON retrievals(caller, at);
CREATE INDEX calls_caller_at ON calls(caller, at);
