"""Settings: the knobs a command keeps off its option list, set with ``skillsight -c``.

A command's everyday options stay options; its research and tuning knobs are *settings*: the same
argparse actions (type, choices, default, help), taken off the command's parser by :func:`settle`
and listed in its ``--help`` epilog. ``skillsight -c KEY=VALUE COMMAND ...`` sets one (repeatable),
``skillsight -c FILE COMMAND ...`` reads a TOML or JSON file with one table per command::

    [eval]
    methods = "skillsight,bm25"
    bootstrap = 1000

A key is the option's long name without the dashes (``query-encoder``); ``COMMAND.KEY=VALUE`` and
the other tables of a file apply only when that command runs. :mod:`skillsight_fast.cli.options` counts
what the command line offers (tests/cli/test_settings.py holds the total to :data:`MAX_OPTIONS`).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from skillsight_fast.errors import SkillsightError

#: The most option groups the whole command line may offer (issue 38: "a CLI a person can read").
MAX_OPTIONS = 90

_SETTING = re.compile(r"^([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)?)=(.*)$", re.DOTALL)
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class SettingError(SkillsightError):
    """A bad ``-c`` setting or settings file (one line, exit status 1)."""


class _Quiet(argparse.ArgumentParser):
    """The parser of a command's settings: an error is an exception, not a usage text and exit."""

    def error(self, message: str) -> NoReturn:
        raise SettingError(message)


class Settings:
    """The settings of one command: the actions :func:`settle` took off its parser."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.parser = _Quiet(prog=f"skillsight {command} settings", add_help=False)
        self.actions: dict[str, argparse.Action] = {}  # key -> action
        #: the mutually exclusive groups a setting came from: (dests, names, whether one is required)
        self.groups: list[tuple[list[str], list[str], bool]] = []

    def key_of(self, action: argparse.Action) -> str:
        longs = [s for s in action.option_strings if s.startswith("--")] or action.option_strings
        return longs[0].lstrip("-")

    def tokens(self, key: str, value: Any) -> list[str]:
        """The command-line tokens of ``key = value`` (a TOML/JSON value or a ``-c`` string)."""
        action = self.actions.get(key.replace("_", "-"))
        if action is None:
            raise SettingError(f"{self.command} has no setting {key!r} (its settings: {', '.join(self.actions)})")
        opt = action.option_strings[0] if action.option_strings[0].startswith("--") else action.option_strings[-1]
        if action.nargs == 0:
            flag = _boolean(key, value)
            if isinstance(action, argparse.BooleanOptionalAction):
                return [opt if flag else "--no-" + opt[2:]]
            return [opt] if flag else []
        if action.nargs == "?" and isinstance(value, (bool, str)) and str(value).lower() in _TRUE | _FALSE:
            return [opt] if _boolean(key, value) else []
        if isinstance(value, (bool, dict)):
            raise SettingError(f"setting {key!r} takes a value, not {json.dumps(value)}")
        items = value if isinstance(value, list) else (
            [v.strip() for v in value.split(",") if v.strip()]
            if isinstance(value, str) and action.nargs in ("+", "*") else [value])
        if isinstance(action, argparse._AppendAction):
            return [f"{opt}={_text(key, v)}" for v in items]
        if action.nargs in ("+", "*"):
            return [opt, *(_text(key, v) for v in items)]
        if len(items) != 1:
            raise SettingError(f"setting {key!r} takes one value, not a list")
        return [f"{opt}={_text(key, items[0])}"]

    def apply(self, args: argparse.Namespace, pairs: Sequence[tuple[str, Any]]) -> None:
        """Set ``args`` from ``(key, value)`` pairs, as the options would have (types, choices)."""
        tokens = [t for key, value in pairs for t in self.tokens(key, value)]
        dests = {a.dest for a in self.actions.values()}
        ns = argparse.Namespace(**{d: copy.copy(getattr(args, d, None)) for d in dests})
        try:
            self.parser.parse_args(tokens, ns)
        except SettingError as exc:
            raise SettingError(f"-c: {exc}") from None
        for d in dests:
            setattr(args, d, getattr(ns, d))
        for group_dests, names, required in self.groups:
            given = sum(getattr(args, d, None) not in (None, False, []) for d in group_dests)
            if given > 1:
                raise SettingError(f"{self.command}: only one of {', '.join(names)}")
            if required and not given:
                raise SettingError(f"{self.command} needs one of {', '.join(names)}")

    def epilog(self) -> str:
        lines = [(f"settings (skillsight -c KEY=VALUE {self.command} ..., or a [{self.command}] table "
                 "in a TOML/JSON file given as -c FILE):")]
        for key, action in self.actions.items():
            kind = ("true|false" if action.nargs == 0 else action.metavar or
                    ("|".join(map(str, action.choices)) if action.choices else "VALUE"))
            if isinstance(kind, tuple):
                kind = " ".join(kind)
            text = (action.help or "").replace("%%", "%")
            if action.default not in (None, False, [], argparse.SUPPRESS) and "default" not in text:
                text += f" (default {action.default})"
            lines.append(f"  {key}={kind}")
            lines += _wrap(text, "      ")
        return "\n".join(lines)


def _wrap(text: str, indent: str, width: int = 100) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent) if text else []


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise SettingError(f"setting {key!r} is true or false, not {value!r}")


def _text(key: str, value: Any) -> str:
    if isinstance(value, (dict, list, bool)) or value is None:
        raise SettingError(f"setting {key!r}: {json.dumps(value)} is not a value")
    return str(value)


def settle(p: argparse.ArgumentParser, command: str, names: Iterable[str]) -> Settings:
    """Take the options ``names`` (e.g. ``"--int8"``) off ``p`` and make them ``command``'s settings.

    ``p`` keeps their defaults (``parse_args`` still yields every attribute); an option that is not
    there is a programming error (a renamed option must be renamed here too).
    """
    table = Settings(command)
    defaults: dict[str, Any] = {}
    for name in names:
        action = p._option_string_actions.get(name)
        if action is None:
            raise ValueError(f"{command}: no option {name} to make a setting")
        p._remove_action(action)
        for s in action.option_strings:
            p._option_string_actions.pop(s, None)
        for group in p._action_groups:
            if action in group._group_actions:
                group._group_actions.remove(action)
        for group in p._mutually_exclusive_groups:
            if action in group._group_actions:
                # the group spans options and settings now: checked once the settings are applied
                group._group_actions.remove(action)
                rest = list(group._group_actions)
                table.groups.append(([a.dest for a in rest] + [action.dest],
                                     [a.option_strings[-1] for a in rest] + [f"-c {table.key_of(action)}=..."],
                                     group.required))
                group.required = False
        action.required = False
        table.parser._add_action(action)
        table.actions[table.key_of(action)] = action
        default = action.default
        if isinstance(default, str) and action.type is not None:
            default = action.type(default)
        defaults[action.dest] = default
    p.set_defaults(_settings=table, **defaults)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = ((p.epilog + "\n\n") if p.epilog else "") + table.epilog()
    return table


def read_settings(values: Sequence[str], command: str) -> list[tuple[str, Any]]:
    """The ``(key, value)`` pairs of the ``-c`` values that apply to ``command``, in order."""
    pairs: list[tuple[str, Any]] = []
    for value in values:
        m = _SETTING.match(value)
        if m:
            key = m.group(1)
            if "." in key:
                section, key = key.split(".", 1)
                if section != command:
                    continue
            pairs.append((key, m.group(2)))
            continue
        for section, table in _read_file(value).items():
            if section == command:
                pairs += list(table.items())
    return pairs


def _read_file(path: str) -> dict[str, dict[str, Any]]:
    from skillsight_fast.limits import read_regular_file

    raw = read_regular_file(path, 1 << 20, error=SettingError, what="the settings file")
    text = raw.decode("utf-8", "replace")
    try:
        if path.endswith(".json"):
            data = json.loads(text)
        else:
            import tomllib

            data = tomllib.loads(text)
    except (ValueError, json.JSONDecodeError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise SettingError(f"settings file {path}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SettingError(f"settings file {path}: one table per command, e.g. [eval] (key = value lines)")
    return data


def apply_settings(args: argparse.Namespace, values: Sequence[str], command: str) -> None:
    """Apply the ``-c`` values to the parsed ``args`` of ``command`` (no settings: none may be given)."""
    table: Settings | None = getattr(args, "_settings", None)
    pairs = read_settings(values, command)
    if table is None:
        if pairs:
            raise SettingError(f"{command} has no settings (-c {pairs[0][0]}=...)")
        return
    table.apply(args, pairs)
