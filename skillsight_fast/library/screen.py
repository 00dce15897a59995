"""Index-time scan of skills for text that attacks the agent reading them.

A skill is untrusted text that a hook or proxy puts into an agent's context. This scan flags a skill
when its name, description or body carries one of these, and records the reasons in the index
(manifest ``scan.flagged``: row -> reasons), so ``skillsight scan`` / ``doctor`` can list them and
:func:`skillsight_fast.agents.find.find_skills` leaves flagged skills out unless ``allow_flagged=True``:

``injection``
    Instructions aimed at the model rather than the task: "ignore (all of the) previous
    instructions" (up to four words between the verb and the instructions), "ignore the
    instructions above", "disregard your guidelines", "you are now in developer mode", "do not
    tell the user"; and chat-role markers that fake a turn of the conversation (``</system>``,
    ``<system>``, ``<|im_start|>``, ``[INST]``, ``<<SYS>>``).
``exfiltration``
    A credential store (``~/.ssh``, ``id_rsa``, ``~/.aws/credentials``, ``/etc/shadow``, browser
    cookie stores, ``.netrc``) named within 400 characters of an upload (``curl -d``/``-F``/``-T``,
    ``--data``, ``wget --post-file``, ``nc``, ``requests.post``), or an explicit request to send
    secrets/credentials/API keys to somewhere ("send the credentials to", "upload ~/.env files to").
``fetch-and-run``
    Code downloaded and executed in one step: ``curl ... | sh``, ``wget -O- ... | bash``, the same
    into an interpreter (``| python3``, ``| perl``, ``| ruby``, ``| node``, ``| php``, ...),
    ``bash <(curl ...)``, ``python3 <(curl ...)``, ``source <(curl ...)``, ``eval "$(curl ...)"``,
    ``iex (iwr ...)``, ``DownloadString(...)``/``Invoke-Expression``.
``hidden-unicode``
    Characters a person reviewing the skill does not see: Unicode tag characters
    (U+E0000–U+E007F, used to smuggle ASCII), bidirectional controls (U+202A–U+202E,
    U+2066–U+2069: "Trojan Source"), and runs of two or more zero-width characters.

Every rule but ``hidden-unicode`` reads the text folded first (:func:`fold`): NFKC (fullwidth and
mathematical letters become ASCII), zero-width and other invisible format characters removed,
combining marks dropped, and Cyrillic and Greek letters that look like Latin ones mapped to them,
so "Іgnore" with a Cyrillic "І", "ｉｇｎｏｒｅ" and "ig\u200bnore" read as "ignore".

The rules are deliberately few and literal; their false-positive rate on the bundled libraries
is in docs/SECURITY.md (``bench/screen_library.py`` regenerates it). A flag is a reason to
look, not a verdict: ``allow_flagged`` lets a user who has read the skill use it anyway.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Protocol

#: Bumped when the rules change (stored in the manifest; an index scanned by older rules can be re-indexed).
SCREEN_VERSION = 2

_I = re.IGNORECASE
#: The instructions an attack tells the model to drop.
_ORDERS = r"(?:instructions?|prompts?|rules|directives|guidelines|messages|context)"
_INJECTION = re.compile(
    # "ignore all of the previous instructions": up to four words between the verb and the adjective
    r"\b(?:ignore|disregard|forget)\b(?:\s+[\w'-]+){0,4}?\s+(?:previous|prior|above|earlier|"
    r"preceding|original|system|developer|initial)\s+" + _ORDERS + r"\b"
    r"|\boverride\s+(?:all\s+|any\s+|the\s+|your\s+)*(?:previous|prior|above|earlier|preceding|original)\s+"
    + _ORDERS + r"\b"
    # "ignore the instructions above", "disregard any instructions you were given"
    r"|\b(?:ignore|disregard|forget)\s+(?:(?:all|any|of|the|your|my|these|those|every)\s+){0,3}"
    r"(?:instructions|directives|guidelines|system\s+prompt)\s+(?:above|before|so\s+far|given\s+"
    r"(?:above|before|earlier)|(?:you\s+)?(?:were|have\s+been)\s+given)\b"
    r"|\bdisregard\s+(?:all\s+|any\s+)?(?:your|the)\s+(?:instructions|guidelines|rules|system\s+prompt)\b"
    r"|\byou\s+are\s+now\s+(?:in\s+)?(?:dan\b|developer\s+mode|jailbroken|unrestricted|an?\s+unfiltered)"
    r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|mention\s+(?:this\s+)?to)\s+the\s+user\b"
    r"|\bwithout\s+(?:telling|informing|notifying|alerting)\s+the\s+user\b"
    r"|\b(?:reveal|print|output|repeat)\s+(?:your|the)\s+(?:full\s+)?system\s+prompt\b",
    _I,
)
#: Chat-role markers: text that pretends a new turn of the conversation starts here.
_ROLE_MARKER = re.compile(
    r"</?\s*(?:system|assistant|developer)\s*>"
    r"|<\|\s*im_start\s*\|>[ \t]*(?:system|assistant|developer)[ \t]*\n"
    r"|<\|\s*start_header_id\s*\|>\s*(?:system|assistant|developer)\s*<\|\s*end_header_id\s*\|>"
    r"|<</?SYS>>",
    _I,
)
_CREDENTIAL = re.compile(
    r"~/\.ssh\b|\$HOME/\.ssh\b|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials\b|/etc/shadow\b|"
    r"\.netrc\b|\.git-credentials\b|\.docker/config\.json\b|Login\s+Data\b|Cookies\.sqlite\b|"
    r"\.config/gcloud\b|\.kube/config\b",
    _I,
)
_UPLOAD = re.compile(
    r"\bcurl\b[^\n]{0,200}?(?:\s-d\b|\s--data(?:-binary|-raw|-urlencode)?\b|\s-F\b|\s--form\b|\s-T\b|"
    r"\s--upload-file\b|-X\s*POST\b)|\bwget\b[^\n]{0,200}?--post-(?:file|data)\b|\b(?:nc|ncat|netcat)\s+-?\w*\s*"
    r"[\w.-]+\s+\d{2,5}\b|\brequests\.(?:post|put)\s*\(|\bfetch\s*\([^)]{0,200}method\s*:\s*['\"]POST",
    _I,
)
_SEND_SECRETS = re.compile(
    r"\b(?:send|upload|post|exfiltrate|transmit|forward)\s+(?:the\s+|all\s+|any\s+|your\s+|their\s+)*"
    r"(?:user'?s\s+)?(?:credentials|secrets|api\s+keys|private\s+keys|passwords|(?:api|access|auth)\s+tokens|"
    r"ssh\s+keys|env(?:ironment)?\s+variables|\.env\s+files?)\s+to\b",
    _I,
)
#: Shells: whatever is piped into one runs, arguments or not.
_SHELL = r"(?:(?:ba|z|k|da|fi|c|tc)?sh|pwsh|powershell)"
#: Script interpreters: piped code runs when no script is named (``| python3``, ``| python3 -``).
_INTERPRETER = r"(?:python[23]?(?:\.\d+)?|pypy3?|perl|ruby|node|nodejs|deno|bun|php|osascript|lua|tclsh)"
_RUNNER = f"(?:{_SHELL}|{_INTERPRETER})"
_FETCH_RUN = re.compile(
    r"\b(?:curl|wget)\b[^\n|;]{0,300}\|\s*(?:sudo\s+(?:-\w+\s+)*)?(?:env\s+)?(?:/usr)?(?:/local)?(?:/bin/)?"
    r"(?:" + _SHELL + r"(?![\w.-])|" + _INTERPRETER + r"(?:[ \t]+-(?![\w-])|(?=[ \t]*(?:$|[`'\";&|)#]))))"
    r"|\b(?:iex|Invoke-Expression)\b[^\n]{0,100}(?:iwr|irm|Invoke-WebRequest|Invoke-RestMethod|DownloadString)"
    r"|\bDownloadString\s*\([^\n]{0,200}\)\s*\|\s*(?:iex|Invoke-Expression)\b",
    _I | re.MULTILINE,
)
#: A download inside a process or command substitution, ``<(curl ...`` / ``$(curl ...``, and what
#: makes it fetch-and-run when it comes just before: a runner reading the file, ``source``, ``eval``
#: (two steps, so the common case, no substitution, costs one cheap search).
_SUBSTITUTED = re.compile(r"(?:<\(|\$\()\s*(?:curl|wget)\b", _I)
_RUNS_SUBSTITUTED = re.compile(
    r"(?:(?<![\w.-])" + _RUNNER + r"\s+(?:-\s+)?|(?<![\w.-])" + _RUNNER + r"\s+-c\s+[\"']?"
    r"|(?:^|[\s;&|(])(?:source|\.)\s+"
    r"|\beval\s+[\"']?)$", _I)
#: Every fetch-and-run form names one of these: texts without any skip the rule (most skills).
_FETCH_WORDS = re.compile(r"curl|wget|iwr|irm|invoke-|downloadstring", _I)
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_ZERO_WIDTH_RUN = re.compile("[\u200b\u200c\u200d\u2060\ufeff]{2,}")
#: Invisible characters removed before the rules read the text: zero-width, joiners, word joiner,
#: soft hyphen, BOM, Mongolian vowel separator, bidi and tag characters.
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff]")
#: Combining marks (dropped after NFKD, so "ïgnore" reads as "ignore").
_COMBINING = re.compile("[\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
#: Cyrillic, Greek and other letters drawn like Latin ones (Unicode's confusables, the letters an
#: attack on an English phrase needs), mapped to the Latin letter.
_CONFUSABLES = str.maketrans(
    "АВЕЅІЈКМНОРСТХУԁԛԜаеѕіјорсхуһԝӏɑɡɩοΑΒΕΖΗΙΚΜΝΟΡΤΥΧαιονρτυχϲϳꓲꓳꓰ",
    "ABESIJKMHOPCTXYdqWaesijopcxyhwlagioABEZHIKMNOPTYXaiovptuxcjIOE",
)
#: Characters between a credential store and an upload for them to count as one exfiltration step.
_NEAR = 400


class _Scannable(Protocol):
    name: str
    description: str
    body: str


@dataclass(frozen=True)
class Finding:
    """One rule that matched: its id, a short excerpt and the line it is on."""

    rule: str
    excerpt: str
    line: int

    def __str__(self) -> str:
        return f"{self.rule}: {self.excerpt!r} (line {self.line})"


def _excerpt(text: str, m: re.Match[str] | tuple[int, int]) -> str:
    s = m.group(0) if isinstance(m, re.Match) else text[m[0]:m[1]]
    s = "".join(c if c.isprintable() else f"U+{ord(c):04X}" for c in s)
    return s if len(s) <= 80 else s[:77] + "..."


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def fold(text: str) -> str:
    """``text`` as the rules read it: NFKC, invisible characters removed, combining marks dropped,
    Latin look-alikes mapped to Latin (line breaks are kept, so line numbers still hold).

    Examples
    --------
    >>> fold("\u0406gnore \uff41ll previous in\u200bstructions")
    'Ignore all previous instructions'
    """
    if text.isascii():
        return text
    text = _INVISIBLE.sub("", text)
    text = _COMBINING.sub("", unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFKC", text).translate(_CONFUSABLES)


def screen_text(text: str) -> list[Finding]:
    """Every rule's first match in ``text`` (at most one finding per rule); the rules but
    ``hidden-unicode`` read :func:`fold` of it."""
    raw, text = text, fold(text)
    found: list[Finding] = []
    fetches = _FETCH_WORDS.search(text) is not None
    rules = (("injection", _INJECTION), ("injection", _ROLE_MARKER), ("fetch-and-run", _FETCH_RUN))
    for rule, pattern in rules:
        m = pattern.search(text) if fetches or pattern is not _FETCH_RUN else None
        if m and not any(f.rule == rule for f in found):
            found.append(Finding(rule, _excerpt(text, m), _line(text, m.start())))
    if fetches and not any(f.rule == "fetch-and-run" for f in found):
        for sub in _SUBSTITUTED.finditer(text):
            run = _RUNS_SUBSTITUTED.search(text, max(0, sub.start() - 40), sub.start())
            if run:
                found.append(Finding("fetch-and-run", _excerpt(text, (run.start(), sub.end())),
                                     _line(text, run.start())))
                break
    m = _SEND_SECRETS.search(text)
    if m is None:
        for c in _CREDENTIAL.finditer(text):
            lo, hi = max(0, c.start() - _NEAR), c.end() + _NEAR
            up = _UPLOAD.search(text, lo, hi)
            if up:
                m = c
                break
    if m is not None:
        found.append(Finding("exfiltration", _excerpt(text, m), _line(text, m.start())))
    for what, pattern in (("tag characters", _TAGS), ("bidirectional controls", _BIDI),
                          ("zero-width run", _ZERO_WIDTH_RUN)):
        m = pattern.search(raw)
        if m:
            n = len(pattern.findall(raw))
            found.append(Finding("hidden-unicode", f"{n} x {what} ({_excerpt(raw, m)})",
                                 _line(raw, m.start())))
    return found


def screen_skill(skill: _Scannable) -> list[str]:
    """The reasons to flag one skill (empty when it is clean), as short strings."""
    text = f"{skill.name}\n{skill.description}\n{skill.body}"
    return [str(f) for f in screen_text(text)]
