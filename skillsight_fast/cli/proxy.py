"""``skillsight serve --mcp --proxy CONFIG``: the tool-search MCP proxy (see skillsight_fast.tools.proxy).

``serve`` (in :mod:`skillsight_fast.cli.agents`) adds these options and hands over to
:func:`cmd_proxy` when ``--proxy`` is given.
"""

from __future__ import annotations

import argparse
import logging
import sys

from skillsight_fast.errors import SkillFormatError

logger = logging.getLogger(__name__)


def add_proxy_args(p: argparse.ArgumentParser) -> None:
    """The proxy's options on the ``serve`` parser."""
    g = p.add_argument_group("tool-search proxy (serve --mcp --proxy CONFIG)")
    g.add_argument("--proxy", metavar="CONFIG",
                   help="front the MCP servers of CONFIG (a JSON file with an mcpServers block, as hosts "
                        "use) with search_tools and call_tool; no index folder needed")
    g.add_argument("--pin", action="append", default=[], metavar="SERVER/TOOL",
                   help="also list this tool directly (repeatable); pinned tools are left out of search")
    g.add_argument("--tool-text", choices=("description", "params", "schema"), default=None,
                   help="which tool text is indexed (default: schema)")
    g.add_argument("--start-timeout", type=float, default=None, metavar="S",
                   help="seconds a server may take to start and list its tools (default 60)")
    g.add_argument("--call-timeout", type=float, default=None, metavar="S",
                   help="seconds a forwarded call may take (default 300)")
    g.add_argument("--index-cache", default=None, metavar="DIR",
                   help="folder of saved tool indexes, keyed by the servers' tool lists, so a restart "
                        "does not encode them again (default: the user cache's skillsight-fast/proxy; "
                        "'off': none)")


def _is_this_proxy(config: object) -> bool:
    """Whether a configured server is a skillsight proxy itself (a host config naming the proxy)."""
    words = [getattr(config, "command", ""), *getattr(config, "args", ())]
    return any("skillsight" in w for w in words) and "--proxy" in words


def cmd_proxy(args: argparse.Namespace) -> int:
    """Run the proxy over stdio until the host closes the connection."""
    from skillsight_fast.engine.abstention import resolve_abstention
    from skillsight_fast.tools import proxy as px
    from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT, read_mcp_config

    if not args.mcp:
        raise SkillFormatError("--proxy runs an MCP server: use serve --mcp --proxy CONFIG")
    configs = read_mcp_config(args.proxy)
    skipped = [c.name for c in configs if _is_this_proxy(c)]
    configs = [c for c in configs if not _is_this_proxy(c)]
    if not configs:
        raise SkillFormatError(f"{args.proxy}: names no server other than a skillsight proxy")
    explicit = args.min_score is not None or args.min_cosine is not None
    rule = resolve_abstention("", args.min_score, args.min_cosine) if explicit else None
    proxy = px.ToolProxy(  # no explicit threshold: the one derived when the upstream tools are indexed
        configs, abstention=rule, abstain=not explicit or rule is not None, pins=args.pin, tool_text=args.tool_text or DEFAULT_TOOL_TEXT,
        start_timeout=args.start_timeout or px.START_TIMEOUT,
        call_timeout=args.call_timeout or px.CALL_TIMEOUT,
        index_cache=False if args.index_cache == "off" else args.index_cache)
    if not args.quiet:
        print(f"skillsight tool proxy: {len(configs)} servers ({', '.join(c.name for c in configs)})"
              + (f", skipped {', '.join(skipped)} (a proxy itself)" if skipped else "")
              + "; tools search_tools, call_tool; on stdio", file=sys.stderr)
    px.run_proxy(proxy)
    return 0
