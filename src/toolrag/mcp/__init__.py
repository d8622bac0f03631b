"""The MCP gateway: upstream servers' tools imported into the registry, found and called through one server."""
