"""What Go's regexp package (RE2 syntax, Perl flags) refuses to compile, found cheaply.

Tempo compiles a TraceQL regex with Go's regexp, which is RE2: no lookaround, no
backreferences, no possessive or nested quantifiers, repeat counts up to 1000, and only
the escapes it knows. This is not a regex engine but a scan for the errors RE2 reports at
compile time, so a regex it passes may still match other strings than its author meant,
and a few refusals (an unknown Unicode class name in \\p{...}) go unseen.
"""

import re


_LETTER_ESCAPES = set("afnrtvdDsSwWbBAz")
_CLASS_LETTER_ESCAPES = set("afnrtvdDsSwW")
_POSIX_CLASSES = {"alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower",
                  "print", "punct", "space", "upper", "word", "xdigit"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_GROUP_FLAGS = re.compile(r"\(\?([imsU]*(?:-[imsU]+)?)([:)])")
_NAMED_GROUP = re.compile(r"\(\?P?<([A-Za-z0-9_]+)>")


def re2_problem(pattern):
    """(index, message) of the first thing RE2 would refuse in pattern, or None."""
    try:
        _Re2Scan(pattern).run()
    except _Re2Refusal as refusal:
        return refusal.args
    return None


class _Re2Refusal(Exception):
    pass


class _Re2Scan:
    def __init__(self, pattern):
        self.pattern = pattern
        self.open_groups = []
        self.repeatable = False  # something precedes that a quantifier may repeat
        self.quantified = 0  # 1 just after a quantifier, 2 after its lazy '?'

    def refuse(self, index, message):
        raise _Re2Refusal(index, message)

    def run(self):
        index = 0
        while index < len(self.pattern):
            index = self.item(index)
        if self.open_groups:
            self.refuse(self.open_groups[-1], "missing closing )")

    def item(self, index):
        char, pattern = self.pattern[index], self.pattern
        repeat = _REPEAT.match(pattern, index) if char == "{" else None
        if char in "*+?" or repeat:
            return self.quantifier(index, repeat)
        self.quantified = 0
        if char == "\\":
            self.repeatable = True
            return self.escape(index, _LETTER_ESCAPES | {"Q"})
        if char == "[":
            self.repeatable = True
            return self.char_class(index)
        if char == "(":
            return self.group(index)
        if char == ")":
            if not self.open_groups:
                self.refuse(index, "unexpected )")
            self.open_groups.pop()
            self.repeatable = True
        else:
            self.repeatable = char != "|"
        return index + 1

    def quantifier(self, index, repeat):
        if self.quantified == 1 and self.pattern[index] == "?":
            self.quantified = 2
            return index + 1
        if self.quantified:
            self.refuse(index, "invalid nested repetition operator")
        if not self.repeatable:
            self.refuse(index, "missing argument to repetition operator")
        if repeat:
            low, high = int(repeat.group(1)), repeat.group(3)
            high = low if repeat.group(2) is None else (int(high) if high else None)
            if low > 1000 or (high is not None and (high > 1000 or high < low)):
                self.refuse(index, "invalid repeat count")
        self.quantified = 1
        return repeat.end() if repeat else index + 1

    def group(self, index):
        pattern = self.pattern
        self.repeatable = False
        if not pattern.startswith("(?", index):
            self.open_groups.append(index)
            return index + 1
        for lookaround in ("(?=", "(?!", "(?<=", "(?<!"):
            if pattern.startswith(lookaround, index):
                self.refuse(index, f"lookaround {lookaround} is not supported")
        named = _NAMED_GROUP.match(pattern, index)
        if named:
            self.open_groups.append(index)
            return named.end()
        flags = _GROUP_FLAGS.match(pattern, index)
        if not flags or flags.group(1).endswith("-"):
            self.refuse(index, "invalid or unsupported Perl syntax")
        if flags.group(2) == ":":
            self.open_groups.append(index)
        return flags.end()

    def escape(self, index, letters):
        """Index past the escape at index: a known letter, punctuation, hex, octal, \\p."""
        pattern = self.pattern
        if index + 1 == len(pattern):
            self.refuse(index, "trailing backslash at end of expression")
        char = pattern[index + 1]
        if char == "Q" and "Q" in letters:
            end = pattern.find("\\E", index + 2)
            return len(pattern) if end < 0 else end + 2
        if char in letters:
            return index + 2
        if char in "pP":
            named = re.match(r"\{\^?[A-Za-z_]+\}|[A-Za-z]", pattern[index + 2:])
            if not named:
                self.refuse(index, "invalid character class range")
            return index + 2 + named.end()
        if char == "x":
            hexadecimal = re.match(r"\{[0-9a-fA-F]+\}|[0-9a-fA-F]{2}", pattern[index + 2:])
            if not hexadecimal:
                self.refuse(index, "invalid escape sequence \\x")
            return index + 2 + hexadecimal.end()
        octal = re.match(r"0[0-7]{0,2}|[1-7][0-7]{1,2}", pattern[index + 1:])
        if octal:
            return index + 1 + octal.end()
        if char.isdigit():
            self.refuse(index, f"backreference \\{char} is not supported")
        if char.isascii() and not char.isalnum():
            return index + 2
        self.refuse(index, f"invalid escape sequence \\{char}")

    def char_class(self, index):
        pattern, start = self.pattern, index
        index += 2 if pattern.startswith("[^", index) else 1
        if pattern.startswith("]", index):
            index += 1
        while index < len(pattern) and pattern[index] != "]":
            posix = re.match(r"\[:\^?([a-z]+):\]", pattern[index:])
            if posix:
                if posix.group(1) not in _POSIX_CLASSES:
                    self.refuse(index, "invalid character class range")
                index += posix.end()
                continue
            low, index = self.class_char(index)
            if pattern.startswith("-", index) and not pattern.startswith("-]", index) and index + 1 < len(pattern):
                high, index = self.class_char(index + 1)
                if low is not None and high is not None and low > high:
                    self.refuse(start, "invalid character class range")
        if index >= len(pattern):
            self.refuse(start, "missing closing ]")
        return index + 1

    def class_char(self, index):
        """(the character, or None for an escape standing for more than one; the next index)."""
        if self.pattern[index] != "\\":
            return self.pattern[index], index + 1
        end = self.escape(index, _CLASS_LETTER_ESCAPES)
        escaped = self.pattern[index + 1]
        plain = end == index + 2 and escaped.isascii() and not escaped.isalnum()
        return (escaped if plain else None), end
