"""`record`: a dataclass whose __eq__, __repr__ and __hash__ are shared functions.

@dataclass writes the source of an __init__, __repr__ and __eq__ (and, frozen, a __hash__)
for each class and compiles it when its module is imported. The modules every command
imports (the event records, the turns, the report's figures) hold some 50 such classes,
and compiling them was about a third of a warm report's imports. A record lets dataclass
make the __init__ (and a frozen one's __setattr__), and gives every record the same three
methods, which compare, show and hash the fields dataclass would have, in their order.
"""

from __future__ import annotations

import dataclasses


def record(cls=None, /, *, frozen: bool = False, slots: bool = False):
    """@dataclass(frozen=frozen, slots=slots), with the shared methods; @record or @record(...)."""
    def made(cls):
        cls = dataclasses.dataclass(cls, frozen=frozen, slots=slots, repr=False, eq=False)
        fields = dataclasses.fields(cls)
        cls._compared = tuple(field.name for field in fields if field.compare)
        cls._shown = tuple(field.name for field in fields if field.repr)
        cls.__eq__, cls.__repr__ = _eq, _repr
        cls.__hash__ = _hash if frozen else None  # as dataclass: a mutable record has none
        return cls
    return made if cls is None else made(cls)


def _values(value, names: tuple[str, ...]) -> tuple:
    return tuple(getattr(value, name) for name in names)


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self, self._compared) == _values(other, other._compared)


def _repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
    return f"{self.__class__.__qualname__}({shown})"


def _hash(self) -> int:
    return hash(_values(self, self._compared))
