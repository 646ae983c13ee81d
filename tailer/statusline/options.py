"""The options of `statusline`, their checks, and the quick reading of the footer's command line.

The CLI runs the command on every refresh, so its start-up is most of what it costs: the
command line it is given there (`statusline --format ... --then ...`) is read here by
`quick_options`, before argparse (some 5 ms) is imported. argparse stays the one definition
of the options (tailer/statusline/command.py builds them with the checks below, for --help,
completion, docs and every error message): whatever `quick_options` does not read exactly
as argparse would (--help, --install, an abbreviation, a wrong value) it hands back as None,
and the whole parser reads it. tests/test_statusline.py holds the two to one reading.

Plain classes, not records: tailer/records.py costs the footer 3 ms of start-up.
"""

from __future__ import annotations

# The fields a --format template may name (docs/STATUSLINE.md says what each holds).
FIELDS = ("turn", "session", "state", "pattern", "elapsed", "legs", "running", "verdict",
          "credits", "answer", "session_credits", "review_share")
DEFAULT_FORMAT = "HydraFusion {turn} · {session}"
MAX_FORMAT_CHARS = 500
MAX_WIDTH = 1000
DEFAULT_THEN_TIMEOUT_S = 2.0
# The CLI kills a status line command after 10 s: what it runs for us must end well before.
MAX_THEN_TIMEOUT_S = 8.0


class Template:
    """A --format template, parsed: literal texts and field names, in order (`parts`, each
    a (is_field, text) pair). `{{` and `}}` stand for braces."""

    __slots__ = ("text", "parts")

    def __init__(self, text: str, parts: tuple[tuple[bool, str], ...]):
        self.text, self.parts = text, parts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Template) and other.text == self.text

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


def parse_format(text: str) -> Template:
    """The template `text`; ValueError naming what is wrong: an unknown field, a lone brace,
    a character a terminal would obey (the line may hold only what printable allows)."""
    if not text.strip():
        raise ValueError("an empty template")
    if len(text) > MAX_FORMAT_CHARS:
        raise ValueError(f"a template of more than {MAX_FORMAT_CHARS} characters")
    if not text.isprintable():
        raise ValueError("a template holding a control or direction character")
    parts: list[tuple[bool, str]] = []
    literal, at = "", 0
    while at < len(text):
        char = text[at]
        if char in "{}" and text[at + 1:at + 2] == char:
            literal, at = literal + char, at + 2
        elif char == "}":
            raise ValueError("a `}` that closes no field (write `}}` for a brace)")
        elif char == "{":
            end = text.find("}", at)
            name = text[at + 1:end] if end > 0 else ""
            if name not in FIELDS:
                raise ValueError(f"no field {{{name}}} (fields: {', '.join(FIELDS)})"
                                 if end > 0 else "a `{` that opens no field (write `{{` for a brace)")
            if literal:
                parts.append((False, literal))
            parts.append((True, name))
            literal, at = "", end + 1
        else:
            literal, at = literal + char, at + 1
    if literal:
        parts.append((False, literal))
    return Template(text, tuple(parts))


def parse_width(text: str) -> int:
    """A width in columns, 1 to MAX_WIDTH."""
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_WIDTH:
        raise ValueError(f"expected a whole number of columns from 1 to {MAX_WIDTH}, got {text!r}")
    return int(text)


def parse_then_timeout(text: str) -> float:
    """Seconds above 0 and at most MAX_THEN_TIMEOUT_S."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= MAX_THEN_TIMEOUT_S:
        raise ValueError(f"expected seconds above 0 and at most {MAX_THEN_TIMEOUT_S:g}, got {text!r}")
    return seconds


def parse_then(text: str) -> str:
    if not text.strip():
        raise ValueError("an empty command")
    if "\0" in text:
        raise ValueError("a command holding a NUL character")
    return text


class Options:
    """What the footer's command line asks: the template, the width (None: the terminal's),
    the user's own status line command to run after ours and how long it may take."""

    __slots__ = ("template", "width", "then", "then_timeout_s")

    def __init__(self, template: Template | None = None, width: int | None = None,
                 then: str | None = None, then_timeout_s: float = DEFAULT_THEN_TIMEOUT_S):
        self.template = template or parse_format(DEFAULT_FORMAT)
        self.width, self.then, self.then_timeout_s = width, then, then_timeout_s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Options) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __repr__(self) -> str:
        return "Options(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__) + ")"


# option -> (Options field, its check): the options the footer's command line may carry.
_QUICK = {"--format": ("template", parse_format), "--width": ("width", parse_width),
          "--then": ("then", parse_then), "--then-timeout": ("then_timeout_s", parse_then_timeout)}


def quick_options(argv: list[str]) -> Options | None:
    """The display options of `argv` (what follows `statusline`), or None when the whole
    parser must read it: anything but `--option value` and `--option=value` of the options
    above, each once, with a value that passes its check and does not start with `-`."""
    values: dict[str, object] = {}
    at = 0
    while at < len(argv):
        option, equals, value = argv[at].partition("=")
        if option not in _QUICK:
            return None
        if not equals:
            if at + 1 == len(argv) or argv[at + 1].startswith("-"):
                return None
            value, at = argv[at + 1], at + 1
        at += 1
        name, check = _QUICK[option]
        if name in values:
            return None  # argparse keeps the last: let it say so
        try:
            values[name] = check(value)
        except ValueError:
            return None
    return Options(**values)
