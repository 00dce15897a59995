"""The MCP transport: the service's tools and skill resources on the official MCP SDK, over stdio."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from skillsight_fast._version import __version__
from skillsight_fast.agents.live import UnknownSkillError
from skillsight_fast.agents.service import InvalidCursorError, SkillService
from skillsight_fast.errors import SkillsightError, install_hint

logger = logging.getLogger(__name__)


class OneLineFormatter(logging.Formatter):
    """A log record on one line (its message's line breaks folded), so a host's log of the server's
    stderr gets one line per event."""

    def format(self, record: logging.LogRecord) -> str:
        return " | ".join(line for line in super().format(record).splitlines() if line.strip())


def one_line_logging() -> None:
    """Log to stderr one line per record, at WARNING, unless logging is already set up.

    The SDK's server otherwise installs a rich handler on the root logger that draws every ordinary
    tool error (an unknown skill id, an empty task) as a multi-line block; with a handler already
    there it leaves logging alone.
    """
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


class ListChangedNotifier:
    """Sends ``notifications/resources/list_changed`` to the connected MCP clients after a swap.

    It is the server's middleware: each inbound message records the server's event loop, and a
    handshake-era client's ``notifications/initialized`` records that client's session. A 2026-07-28
    client gets the change on its ``subscriptions/listen`` stream, through the subscription bus.
    :meth:`changed` runs on the watcher's thread and sends through the event loop; a session that is
    gone is dropped, and no failure reaches the server or the watcher.

    Parameters
    ----------
    bus : SubscriptionBus, optional
        The server's subscription bus (SDK 2.x); None sends to handshake-era sessions only.
    """

    #: Most sessions remembered (the oldest is forgotten first); HTTP bounds its sessions lower.
    MAX_SESSIONS = 1024
    #: Longest one notification round may take before the watcher moves on (seconds).
    SEND_TIMEOUT_S = 5.0

    def __init__(self, bus: Any = None) -> None:
        self._bus = bus
        self._token: Any = None
        self._sessions: dict[int, Any] = {}  # insertion-ordered: the oldest first
        self._guard = threading.Lock()

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        """The middleware: note the loop and a new handshake-era session, then go on."""
        import anyio.lowlevel

        if self._token is None:
            self._token = anyio.lowlevel.current_token()
        if ctx.method == "notifications/initialized" and ctx.request_id is None:
            with self._guard:
                self._sessions[id(ctx.session)] = ctx.session
                while len(self._sessions) > self.MAX_SESSIONS:
                    self._sessions.pop(next(iter(self._sessions)))
        return await call_next(ctx)

    def changed(self, live: Any = None) -> None:
        """Tell every client the resource list changed (a swap listener; any thread but the loop's)."""
        import anyio.from_thread

        if self._token is None:
            return  # no client has spoken yet
        try:
            anyio.from_thread.run(self._send, token=self._token)
        except Exception as exc:  # noqa: BLE001 - the loop is gone (server closing) or this is its thread
            logger.debug("resources/list_changed not sent: %s", exc)

    async def _send(self) -> None:
        import anyio

        with self._guard:
            sessions = list(self._sessions.items())
        with anyio.move_on_after(self.SEND_TIMEOUT_S):
            if self._bus is not None:
                from mcp.server.subscriptions import ResourcesListChanged

                try:
                    await self._bus.publish(ResourcesListChanged())
                except Exception:
                    logger.debug("resources/list_changed not published", exc_info=True)
            for key, session in sessions:
                try:
                    await session.send_resource_list_changed()
                except Exception as exc:  # noqa: BLE001 - a closed session: forget it
                    logger.debug("dropped a session: %s", exc)
                    with self._guard:
                        self._sessions.pop(key, None)


def _skills_extension(service: Any) -> dict[str, Any]:
    """``extensions=[...]`` with MCP's skills methods (SEP-2640: ``skills/list``, ``skills/get``;
    agents/mcp_skills.py) where the SDK has the extension API, else nothing."""
    from skillsight_fast.agents.mcp_skills import skills_extension

    try:
        return {"extensions": [skills_extension(service)]}
    except SkillsightError:
        return {}


def build_mcp_server(service: SkillService) -> Any:
    """An MCP server (official SDK; v2 ``MCPServer`` or v1 ``FastMCP``) with the two tools and the
    skills as resources (``skill://<id>/SKILL.md`` listed, any file of a skill folder readable)."""
    one_line_logging()
    try:
        from mcp.server.mcpserver import MCPServer as Server
        from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    except ImportError:
        try:  # mcp 1.x
            from mcp.server.fastmcp import FastMCP as Server
            from mcp.server.fastmcp.exceptions import ResourceError, ToolError
        except ImportError:
            raise SkillsightError(
                "the MCP server needs the official MCP SDK: " + install_hint("serve")
            ) from None
    try:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    except ImportError:  # mcp 1.x
        ResourceNotFoundError = ResourceError
    import anyio
    import mcp.types as mcp_types
    from mcp.server.lowlevel.helper_types import ReadResourceContents

    class SkillServer(Server):  # type: ignore[misc,valid-type]
        """The SDK server with the live index's skills as its resources."""

        async def list_resources(self) -> list[Any]:
            """Every listed skill (the SDK's own callers); clients get pages, below."""
            records = await anyio.to_thread.run_sync(lambda: service.live().resources())
            return [mcp_types.Resource.model_validate(r) for r in records]

        async def _handle_list_resources(self, ctx: Any, params: Any) -> Any:
            """``resources/list``: one page of :data:`RESOURCES_PAGE_SIZE` skills and its ``nextCursor``."""
            cursor = getattr(params, "cursor", None) if params is not None else None
            try:
                records, nxt = await anyio.to_thread.run_sync(service.resources_page, cursor)
            except InvalidCursorError as exc:
                from mcp.shared.exceptions import MCPError

                raise MCPError(mcp_types.INVALID_PARAMS, str(exc)) from None
            resources = [mcp_types.Resource.model_validate(r) for r in records]
            return mcp_types.ListResourcesResult(resources=resources, next_cursor=nxt)

        async def list_resource_templates(self) -> list[Any]:
            return [mcp_types.ResourceTemplate.model_validate({
                "uriTemplate": "skill://{skill}/{+path}", "name": "skill-file", "mimeType": "text/markdown",
                "description": "A file of an indexed skill's folder: SKILL.md, scripts/..., references/..."})]

        async def read_resource(self, uri: Any, context: Any = None) -> list[Any]:
            try:
                content, mime = await anyio.to_thread.run_sync(service.read_uri, str(uri))
            except UnknownSkillError as exc:
                raise ResourceNotFoundError(str(exc)) from None
            except SkillsightError as exc:
                raise ResourceError(str(exc)) from None
            return [ReadResourceContents(content=content, mime_type=mime)]

    instructions = (
        "Skill search over a local library of agent skills. Call find_skills with the user's task "
        "to get the best-fitting skills (an empty list means no skill fits), then get_skill(id) "
        "to read the chosen skill's SKILL.md before following it; get_skill(id, path) reads a file "
        "the SKILL.md refers to (scripts/..., references/...). Every skill is also the resource "
        "skill://<id>/SKILL.md."
    )
    # log_level: no INFO chatter (the SDK configures the root logger only when nothing has yet)
    try:  # serverInfo.version: the package's version, not an empty string
        from mcp.server.subscriptions import InMemorySubscriptionBus
    except ImportError:  # an SDK without subscriptions: no list_changed notifications
        try:
            server = SkillServer("skillsight", instructions=instructions, version=__version__,
                                 log_level="WARNING", **_skills_extension(service))
        except TypeError:  # mcp 1.x FastMCP takes no version: set it on its low-level server
            server = SkillServer("skillsight", instructions=instructions, log_level="WARNING")
            if getattr(server, "_mcp_server", None) is not None:
                server._mcp_server.version = __version__
    else:
        bus = InMemorySubscriptionBus()
        notifier = ListChangedNotifier(bus)
        server = SkillServer("skillsight", instructions=instructions, version=__version__,
                             log_level="WARNING", subscriptions=bus, middleware=[notifier],
                             **_skills_extension(service))
        _declare_resources_list_changed(server)
        service.add_swap_listener(notifier.changed)

    @server.tool()
    async def find_skills(task: str, k: int = 5, tags: list[str] | None = None, source: str | None = None,
                          cut: str = "task", collapse: bool = True) -> dict[str, Any]:
        """Find the skills that fit a task, best first.

        Each hit has id, uri (the skill:// resource of its SKILL.md), name, description, path,
        score (fused), dense and lexical score parts, evidence (the task's distinctive words the
        skill contains), tags, pinned (skills the library always returns first) and copies (ids of
        duplicates of this skill folded into it). No hits means that no skill in the library fits
        the task well enough.

        Args:
            task: The task, in natural language.
            k: At most how many skills to return (1 to 100), besides the pinned ones.
            tags: Only skills that carry all of these tags.
            source: Only skills from this folder (or id prefix).
            cut: "task" drops all hits when the best one is below the threshold; "hit" drops each
                hit below it, so fewer than k come back when fewer fit.
            collapse: Fold copies of one skill (same name, near-identical text) into one hit.
        """
        def run() -> dict[str, Any]:
            return service.find(task, k, tags=tags, source=source, cut=cut, collapse=collapse)

        try:
            return await anyio.to_thread.run_sync(run)  # type: ignore[no-any-return]
        except SkillsightError as exc:  # bad input: the agent sees the reason and can correct it
            raise ToolError(str(exc)) from None

    @server.tool()
    async def get_skill(id: str, path: str | None = None) -> str:
        """Return the full SKILL.md text of a skill found by find_skills, or a file in its folder.

        Args:
            id: The skill's id, as returned by find_skills.
            path: Optional file inside the skill's folder, relative to it (e.g. "scripts/extract.py"
                or "references/FORMS.md"); it may not leave the folder.
        """
        try:
            out = await anyio.to_thread.run_sync(service.get_skill, id, path)
            return str(out["text"])
        except SkillsightError as exc:
            raise ToolError(str(exc)) from None

    return server


def _declare_resources_list_changed(server: Any) -> None:
    """Declare ``resources.listChanged`` in ``initialize`` (the SDK takes it only as an argument of
    ``create_initialization_options``, which its transports call without one). 2026-07-28 clients
    see it in ``server/discover``, derived by the SDK from the served ``subscriptions/listen``."""
    from mcp.server.lowlevel import NotificationOptions

    low = getattr(server, "_lowlevel_server", None)
    if low is None:
        return
    create = low.create_initialization_options

    def with_resources_changed(notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        return create(notification_options or NotificationOptions(resources_changed=True), *args, **kwargs)

    low.create_initialization_options = with_resources_changed


def run_mcp(service: SkillService) -> None:
    """Serve the MCP tools over stdio until the client closes the connection."""
    from skillsight_fast.agents.stdin_filter import filtered_stdin

    with filtered_stdin():  # a lone surrogate escape would make the SDK drop the request
        build_mcp_server(service).run("stdio")

