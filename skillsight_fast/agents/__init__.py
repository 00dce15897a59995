"""What agents and their hosts talk to: the find use case, the MCP and HTTP servers, the
live index behind them, the prompt hook, host installers and endpoint records."""
