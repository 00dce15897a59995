"""The prompt hook's options, defined once.

:data:`HOOK_OPTIONS` is the one table: ``skillsight hook``'s parser (its ``--help``), the hook's own
argv parsing (:func:`skillsight_fast.agents.hook.main`, silent on bad arguments) and the installers
that write the hook's command line into a host's settings (:func:`hook_argv`) all read it.
Standard library only: the hook imports it on every prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple


class HookOption(NamedTuple):
    """One option of ``skillsight hook``: its flags and the ``add_argument`` keywords (a named tuple,
    not a dataclass: ``dataclasses`` would add ``inspect`` to every prompt's imports)."""

    flags: tuple[str, ...]
    dest: str
    #: ``add_argument`` keywords (type, default, action, metavar, required, help).
    spec: dict[str, Any]

    @property
    def default(self) -> Any:
        return self.spec.get("default", False if self.spec.get("action") == "store_true" else None)


HOOK_OPTIONS: tuple[HookOption, ...] = (
    HookOption(("-i", "--index"), "index", {"required": True, "metavar": "DIR"}),
    HookOption(("-k",), "k", {"type": int, "default": 3, "help": "most skills listed (default 3; 1..20)"}),
    HookOption(("--min-cosine",), "min_cosine", {
        "metavar": "C", "default": None,
        "help": "list only skills whose raw cosine q.d with the prompt is at least C ('none': no threshold); "
                "default: the index's (derived at build, or calibration.json)"}),
    HookOption(("--no-abstain",), "no_abstain", {
        "action": "store_true", "help": "no threshold at all: always list the k best skills"}),
    HookOption(("--budget",), "budget", {
        "type": float, "default": 5.0, "metavar": "S",
        "help": "seconds the hook may take in all; past it, it prints nothing (default 5)"}),
    HookOption(("--server-timeout",), "server_timeout", {
        "type": float, "default": 0.5, "metavar": "S",
        "help": "seconds a warm server gets before the hook searches in-process (default 0.5)"}),
    HookOption(("--no-cold",), "no_cold", {
        "action": "store_true", "help": "only ask a warm server; never load the model here"}),
    HookOption(("-v", "--verbose"), "verbose", {
        "action": "store_true", "help": "say on stderr why there is no answer"}),
)


def add_hook_args(p: Any, hosts: Iterable[str]) -> None:
    """Add the hook's arguments to the argparse parser ``p``: the host (one of ``hosts``), then
    every option of :data:`HOOK_OPTIONS`."""
    p.add_argument("host", choices=sorted(hosts), help="the host whose hook protocol to speak")
    for option in HOOK_OPTIONS:
        p.add_argument(*option.flags, dest=option.dest, **option.spec)


def hook_argv(host: str, index: str, **values: Any) -> list[str]:
    """The hook's arguments for ``host`` and ``index`` with the option values ``values`` (by dest);
    values left at their defaults (or None) are not written.

    Raises
    ------
    TypeError
        A value names no option of :data:`HOOK_OPTIONS`.
    """
    options = {o.dest: o for o in HOOK_OPTIONS}
    unknown = sorted(set(values) - set(options))
    if unknown:
        raise TypeError(f"no hook option {', '.join(unknown)}")
    argv = [host, options["index"].flags[0], str(index)]
    for dest, value in values.items():
        option = options[dest]
        if dest == "index" or value is None or value == option.default:
            continue
        if option.spec.get("action") == "store_true":
            argv.append(option.flags[-1])
        else:
            argv += [option.flags[-1], str(value)]
    return argv
