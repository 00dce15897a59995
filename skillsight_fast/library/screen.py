"""Index-time scan of skills for text that attacks the agent reading them.

A skill is untrusted text that a hook or proxy puts into an agent's context. This scan flags a skill
when its name, description or body carries one of these, and records the reasons in the index
(manifest ``scan.flagged``: row -> reasons), so ``skillsight scan`` / ``doctor`` can list them and
:func:`skillsight_fast.agents.find.find_skills` leaves flagged skills out unless ``allow_flagged=True``:

``injection``
    Instructions aimed at the model rather than the task: "ignore (all) previous instructions",
    "disregard your guidelines", "you are now in developer mode", "do not tell the user".
``exfiltration``
    A credential store (``~/.ssh``, ``id_rsa``, ``~/.aws/credentials``, ``/etc/shadow``, browser
    cookie stores, ``.netrc``) named within 400 characters of an upload (``curl -d``/``-F``/``-T``,
    ``--data``, ``wget --post-file``, ``nc``, ``requests.post``), or an explicit request to send
    secrets/credentials/API keys to somewhere ("send the credentials to", "upload ~/.env files to").
``fetch-and-run``
    Code downloaded and executed in one step: ``curl ... | sh``, ``wget -O- ... | bash``,
    ``bash <(curl ...)``, ``iex (iwr ...)``, ``DownloadString(...)``/``Invoke-Expression``.
``hidden-unicode``
    Characters a person reviewing the skill does not see: Unicode tag characters
    (U+E0000–U+E007F, used to smuggle ASCII), bidirectional controls (U+202A–U+202E,
    U+2066–U+2069: "Trojan Source"), and runs of two or more zero-width characters.

The rules are deliberately few and literal; their false-positive rate on the bundled 3,434
skills is in docs/SECURITY.md (``bench/scan_library.py`` regenerates it). A flag is a reason to
look, not a verdict: ``allow_flagged`` lets a user who has read the skill use it anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

#: Bumped when the rules change (stored in the manifest; an index scanned by older rules can be re-indexed).
SCREEN_VERSION = 1

_I = re.IGNORECASE
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*(?:previous|prior|above|earlier|"
    r"preceding|original|system)\s+(?:instructions?|prompts?|rules|directives|guidelines|messages)\b"
    r"|\bdisregard\s+(?:all\s+|any\s+)?(?:your|the)\s+(?:instructions|guidelines|rules|system\s+prompt)\b"
    r"|\byou\s+are\s+now\s+(?:in\s+)?(?:dan\b|developer\s+mode|jailbroken|unrestricted|an?\s+unfiltered)"
    r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|mention\s+(?:this\s+)?to)\s+the\s+user\b"
    r"|\bwithout\s+(?:telling|informing|notifying|alerting)\s+the\s+user\b"
    r"|\b(?:reveal|print|output|repeat)\s+(?:your|the)\s+(?:full\s+)?system\s+prompt\b",
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
_FETCH_RUN = re.compile(
    r"\b(?:curl|wget)\b[^\n|;]{0,300}\|\s*(?:sudo\s+(?:-\w+\s+)*)?(?:ba|z|k|da)?sh\b"
    r"|\b(?:ba|z)?sh\s+<\(\s*(?:curl|wget)\b"
    r"|\b(?:ba|z)?sh\s+-c\s+[\"']?\$\(\s*(?:curl|wget)\b"
    r"|\b(?:iex|Invoke-Expression)\b[^\n]{0,100}(?:iwr|irm|Invoke-WebRequest|Invoke-RestMethod|DownloadString)"
    r"|\bDownloadString\s*\([^\n]{0,200}\)\s*\|\s*(?:iex|Invoke-Expression)\b",
    _I,
)
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_ZERO_WIDTH_RUN = re.compile("[\u200b\u200c\u200d\u2060\ufeff]{2,}")
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


def _excerpt(text: str, m: re.Match[str]) -> str:
    s = m.group(0)
    s = "".join(c if c.isprintable() else f"U+{ord(c):04X}" for c in s)
    return s if len(s) <= 80 else s[:77] + "..."


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def screen_text(text: str) -> list[Finding]:
    """Every rule's first match in ``text`` (at most one finding per rule)."""
    found: list[Finding] = []
    for rule, pattern in (("injection", _INJECTION), ("fetch-and-run", _FETCH_RUN)):
        m = pattern.search(text)
        if m:
            found.append(Finding(rule, _excerpt(text, m), _line(text, m.start())))
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
        m = pattern.search(text)
        if m:
            n = len(pattern.findall(text))
            found.append(Finding("hidden-unicode", f"{n} x {what} ({_excerpt(text, m)})", _line(text, m.start())))
    return found


def screen_skill(skill: _Scannable) -> list[str]:
    """The reasons to flag one skill (empty when it is clean), as short strings."""
    text = f"{skill.name}\n{skill.description}\n{skill.body}"
    return [str(f) for f in screen_text(text)]
