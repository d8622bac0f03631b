"""The HTTP API (FastAPI), its dashboard and the operator console; the way in they share lives in access/."""
