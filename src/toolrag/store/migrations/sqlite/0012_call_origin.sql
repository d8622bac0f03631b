-- Who started a call when it was not an agent: "console" for an admin's trial on a tool's console page. Monitoring
-- tells trials from agents' calls by it; NULL (every call logged before) is an agent's.
ALTER TABLE calls ADD COLUMN origin TEXT;
