"""Tool schemas as untrusted input: which draft a schema follows (drafts.py), its patterns run in linear time
(patterns.py), its references local and acyclic (refs.py), and validators whose work is bounded (validation.py)."""
