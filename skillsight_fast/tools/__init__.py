"""Tool catalogs as a skill source: tools (MCP tools, JSON function schemas) indexed as skills.

:mod:`skillsight_fast.tools.catalog` turns a tool into a :class:`~skillsight_fast.library.skills.Skill`
(id ``server/tool``) and reads host ``mcpServers`` configurations.
"""

from skillsight_fast.tools.catalog import (
    DEFAULT_TOOL_TEXT,
    TOOL_TEXTS,
    ServerConfig,
    Tool,
    parse_mcp_config,
    parse_server_arg,
    tool_skill,
)

__all__ = ["DEFAULT_TOOL_TEXT", "TOOL_TEXTS", "ServerConfig", "Tool", "parse_mcp_config", "parse_server_arg",
           "tool_skill"]
