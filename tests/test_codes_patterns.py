"""Each kind of code (tailer/codes.py) is checked with str and bytes methods, for the
footer's start-up; here each check is held to the regular expression it replaced, the rule
docs/TRACES.md states: the same answer for codes, near misses, lengths around the bound,
and text no code holds (non-ASCII, control characters, lone surrogates, spaces, slashes).
"""

import re

import pytest
from hypothesis import given, example, strategies as st

from tailer import codes

# The patterns the kinds were before, as they were written: the oracle.
PATTERNS = {
    "enum": re.compile(r"(?=.{1,64}\Z)[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*", re.ASCII | re.DOTALL),
    "model": re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}(?:/[A-Za-z0-9][A-Za-z0-9._:+-]{0,63})?", re.ASCII),
    "tool": re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}", re.ASCII),
    "id": re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", re.ASCII),
    "version": re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}", re.ASCII),
    "field": re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII),
    "name": re.compile(r"(?=.{1,128}\Z)[A-Za-z][A-Za-z0-9_]*(?:[.-][A-Za-z0-9_]+)*", re.ASCII),
    "words": re.compile(
        r"(?=.{1,160}\Z)[A-Za-z0-9_][A-Za-z0-9_.:+-]*(?:/[A-Za-z0-9][A-Za-z0-9_.:+-]*)?"
        r"(?: [A-Za-z0-9_][A-Za-z0-9_.:+-]*(?:/[A-Za-z0-9][A-Za-z0-9_.:+-]*)?){0,3}", re.ASCII),
}
KINDS = {value.name: value for value in vars(codes).values() if isinstance(value, codes.CodeKind)}
# What a code may hold, what one never does, and the look-alikes of both: the Kelvin sign and
# the dotless i (which some Unicode case rules fold to ASCII letters), a digit of another
# script, a non-breaking space, a full stop of another script, a lone surrogate.
CODE_CHARACTERS = "aAzZ09_.-:+/ "
ODD_CHARACTERS = "\n\r\t\0\x7f\u212a\u0131\u0660\u00a0\u3002\ud800\udfff\U0001f600é#%"
SAMPLES = ["", "a", "1", "_", "a.b", "a..b", "a.", ".a", "a-b_c.d", "a/b", "a//b", "/a", "a/",
           "a/_b", "a b", "a  b", " a", "a ", "a b c d", "a b c d e", "gpt-5.4", "openai/gpt-4o",
           "claude-sonnet-4.6", "fusion-1:phase:0", "1.0.102", "A", "aB", "a\n", "a\nb",
           "routingLatencyMs", "gen_ai.client.operation.duration", "chat gpt-5.4"]


def texts():
    """Texts near codes: runs of code characters with odd ones among them, and lengths
    around every kind's bound (64, 128, 160 and each part of a model's 64)."""
    short = st.text(st.sampled_from(CODE_CHARACTERS + ODD_CHARACTERS), max_size=12)
    mostly_code = st.text(st.sampled_from(CODE_CHARACTERS * 8 + ODD_CHARACTERS), max_size=40)
    anything = st.text(max_size=20)
    long = st.builds(
        lambda head, length, middle, tail: head + "a" * length + middle + tail,
        st.sampled_from(["", "a", "A", "1", "_", "a/", "a.", "a b "]),
        st.integers(55, 170), st.sampled_from(["", "/", ".", " ", "..", "-", "é", " a/b"]),
        st.sampled_from(["", "b", "/b" + "c" * 62, "/b" + "c" * 63, " c", "."]))
    return st.one_of(short, mostly_code, anything, long, st.sampled_from(SAMPLES))


def codes_of(kind: str):
    """Codes of the kind as its pattern (without its look-ahead) generates them."""
    pattern = PATTERNS[kind].pattern.split(r"\Z)", 1)[-1]
    return st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True)


@pytest.mark.parametrize("kind", sorted(PATTERNS))
@given(text=texts())
@example(text="\u212a")
def test_each_kind_checks_a_text_as_its_pattern_did(kind, text):
    assert KINDS[kind].is_code(text) is (PATTERNS[kind].fullmatch(text) is not None)


@pytest.mark.parametrize("kind", sorted(PATTERNS))
@given(data=st.data())
def test_each_kind_checks_codes_and_their_near_misses_as_its_pattern_did(kind, data):
    """A code the pattern makes, then that code with a character put in, taken out or
    changed: where the answers of a check and a pattern would part."""
    text = data.draw(codes_of(kind))
    assert KINDS[kind].is_code(text) is (PATTERNS[kind].fullmatch(text) is not None)
    at = data.draw(st.integers(0, len(text)))
    character = data.draw(st.sampled_from(CODE_CHARACTERS + ODD_CHARACTERS))
    for changed in (text[:at] + character + text[at:], text[:at] + text[at + 1:],
                    text[:at] + character + text[at + 1:], text * 2, text + " " + text):
        assert KINDS[kind].is_code(changed) is (PATTERNS[kind].fullmatch(changed) is not None), changed


LENGTHS = (0, 1, 2, 30, 62, 63, 64, 65, 66, 126, 127, 128, 129, 130, 158, 159, 160, 161, 162)


def around_the_bounds():
    """Texts of every length near a kind's bound: whole, in two parts (a model's two sides,
    a name's), and as up to five words."""
    yield from ("a" * n for n in range(262))
    for head in LENGTHS:
        for tail in LENGTHS:
            for between in "/ .-_:":
                yield "a" * head + between + "b" * tail
    for length in LENGTHS:
        for count in range(1, 6):
            yield " ".join(["a" * length] * count)
            yield " ".join(["a/" + "b" * length] * count)


@pytest.mark.parametrize("kind", sorted(PATTERNS))
def test_each_kind_bounds_lengths_as_its_pattern_did(kind):
    for text in around_the_bounds():
        assert KINDS[kind].is_code(text) is (PATTERNS[kind].fullmatch(text) is not None), text


def test_every_kind_has_its_pattern_here():
    assert set(KINDS) == set(PATTERNS)


@pytest.mark.parametrize("kind", sorted(PATTERNS))
def test_accept_keeps_a_code_and_refuses_the_rest(kind):
    good = {"enum": "cascade", "model": "gpt-5.4", "tool": "bash", "id": "fusion-1", "version": "1.0.1",
            "field": "durationMs", "name": "github.copilot", "words": "chat gpt-5.4"}[kind]
    assert KINDS[kind].accept(good) == good
    assert KINDS[kind].accept("/etc/passwd, an error") == codes.OTHER
    assert KINDS[kind].accept("") is None and KINDS[kind].accept(None) is None
