"""Limits that several layers share (search, the API, the gateway, the command line); no imports, so any of them
can read these without loading the rest."""

MAX_K = 5  # tools one search returns at most for one step
MAX_SET_TOOLS = 16  # tools a request of several steps gets at most
# Search reads this much of a request (more than its embedding models read); longer ones are searched in part, with
# data blobs left out (search/request.py), and the answer says so.
MAX_REQUEST_CHARS = 4000
# What the edges accept as one request's text (the API's /search, the gateway's find_tools): a pasted document or
# image fits; every step after it is linear in its length, and the HTTP body cap bounds it again.
MAX_MESSAGE_CHARS = 100_000
