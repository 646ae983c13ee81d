"""`record`: a class of named fields, as @dataclass makes one, without the dataclasses module.

The modules every report imports (the event records, the turns, the report's figures) hold
some 50 classes of plain data. Importing dataclasses imports inspect, and inspect imports
ast, dis and tokenize: some 6 ms of the 40 ms a warm report may spend on imports, for
nothing a record uses. A record has only what these classes need: fields in order, a base
class's first; defaults, a default made anew for each instance (`field(factory=...)`),
keyword-only fields, fields left out of comparing or of the repr; frozen and slots. Only
__init__ is compiled for each class; every record shares one __eq__, __repr__ and __hash__.
`fields`, `replace` and `as_dict` stand for their dataclasses namesakes.

`TupleRecord` is the same idea for collections.namedtuple, for the few values made once a
line: importing collections (its ABC-based classes) was some 2 ms of the footer's refresh.
"""

from __future__ import annotations

try:  # namedtuple's own accessor of an item, in C
    from _collections import _tuplegetter
except ImportError:  # another Python than CPython
    from operator import itemgetter

    def _tuplegetter(index: int, doc: str):
        return property(itemgetter(index), doc=doc)

_MADE = object()  # the __init__ default of a field whose default is made by its factory


class FrozenError(AttributeError):
    """A frozen record's field was set or deleted."""


class Field:
    """One field: its name and annotation (text: every module here defers annotations), and
    how __init__, ==, hash and repr treat it."""

    __slots__ = ("name", "type", "default", "factory", "compare", "repr", "kw_only")

    def __init__(self, default=_MADE, factory=None, compare=True, repr=True, kw_only=False):
        self.name = self.type = None
        self.default, self.factory = default, factory
        self.compare, self.repr, self.kw_only = compare, repr, kw_only

    @property
    def required(self) -> bool:
        return self.default is _MADE and self.factory is None


def field(*, default=_MADE, factory=None, compare=True, repr=True, kw_only=False) -> Field:
    """A field's options in a record's body, as dataclasses.field (`factory`: default_factory)."""
    if factory is not None and default is not _MADE:
        raise TypeError("a field has a default or a factory, not both")
    return Field(default, factory, compare, repr, kw_only)


def record(cls=None, /, *, frozen: bool = False, slots: bool = False):
    """The class as a record: @record, or @record(frozen=..., slots=...) as for @dataclass."""
    def made(cls):
        own = _own_fields(cls)
        every = {f.name: f for base in reversed(cls.__mro__[1:]) for f in getattr(base, "__record_fields__", ())}
        every.update((f.name, f) for f in own)
        if slots:
            cls = _with_slots(cls, own)
        cls.__record_fields__ = tuple(every.values())
        cls._compared = tuple(f.name for f in cls.__record_fields__ if f.compare)
        cls._shown = tuple(f.name for f in cls.__record_fields__ if f.repr)
        cls.__match_args__ = tuple(f.name for f in cls.__record_fields__ if not f.kw_only)
        cls.__init__ = _compiled_when_first_called(cls, frozen)
        cls.__eq__, cls.__repr__ = _eq, _repr
        cls.__hash__ = _hash if frozen else None  # as dataclass: a mutable record has none
        if frozen:
            cls.__setattr__, cls.__delattr__ = _refuse_set, _refuse_delete
        if frozen and slots:  # pickling (to and from the report's workers) sets each slot
            cls.__getstate__, cls.__setstate__ = _getstate, _setstate
        return cls
    return made if cls is None else made(cls)


def fields(value) -> tuple[Field, ...]:
    """A record's (or a record class's) fields, in order."""
    if not is_record(value):
        raise TypeError(f"{value!r} is not a record")
    return value.__record_fields__


def is_record(value) -> bool:
    return isinstance(getattr(value, "__record_fields__", None), tuple)


def replace(value, /, **changes):
    """A new record of the same class, with `changes` in the place of those fields."""
    values = {f.name: getattr(value, f.name) for f in fields(value)}
    values.update(changes)
    return type(value)(**values)


def as_dict(value) -> dict:
    """The record's fields as a dict, records inside it (in tuples, lists and dicts too) as
    dicts of theirs: what dataclasses.asdict gives, without copying the other values."""
    return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}


def _plain(value):
    if is_record(value) and not isinstance(value, type):
        return as_dict(value)
    if type(value) in (tuple, list):
        return type(value)(map(_plain, value))
    if type(value) is dict:
        return {key: _plain(item) for key, item in value.items()}
    return value


def _own_fields(cls) -> list[Field]:
    found = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        value = cls.__dict__.get(name, _MADE)
        spec = value if isinstance(value, Field) else Field(default=value)
        if type(spec.default) in (list, dict, set):
            raise TypeError(f"{cls.__name__}.{name}: a mutable default is shared; use field(factory=...)")
        spec.name, spec.type = name, annotation
        found.append(spec)
    return found


def _with_slots(cls, own: list[Field]):
    """The class made again with __slots__ of its own fields, as dataclass(slots=True) does:
    slots cannot be added to a class once made, and a slot cannot share a name with a
    class attribute, so the defaults leave the class body (__init__ holds them)."""
    body = dict(cls.__dict__)
    for name in ("__dict__", "__weakref__", *(f.name for f in own)):
        body.pop(name, None)
    body["__slots__"] = tuple(f.name for f in own)
    return type(cls)(cls.__name__, cls.__bases__, body)


def _compiled_when_first_called(cls, frozen: bool):
    """An __init__ that compiles the class's own (`_init`) the first time a record is made,
    puts it in its place and runs it: compiling costs some 0.15 ms a class, and a command
    imports many records it never makes (the status line's refresh, some 40 of them)."""
    def __init__(self, *args, **kwargs):
        if cls.__dict__.get("__init__") is __init__:
            cls.__init__ = _init(cls, frozen)
        cls.__init__(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _init(cls, frozen: bool):
    """__init__ compiled from its source, as dataclass makes it: no loop over fields at run
    time, for records made a million times in a month's logs."""
    positional, keyword, lines = [], [], []
    names = {"_MADE": _MADE, "_set": object.__setattr__}
    for f in cls.__record_fields__:
        if f.required:
            parameter = f.name
        else:
            names[f"_default_{f.name}"] = f.default
            parameter = f"{f.name}=_default_{f.name}"
        (keyword if f.kw_only else positional).append(parameter)
        value = f.name
        if f.factory is not None:
            names[f"_factory_{f.name}"] = f.factory
            value = f"_factory_{f.name}() if {f.name} is _MADE else {f.name}"
        lines.append(f"_set(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    parameters = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    body = "\n    ".join(lines or ["pass"])
    exec(f"def __init__({parameters}):\n    {body}", names)
    function = names["__init__"]
    function.__qualname__ = f"{cls.__qualname__}.__init__"
    return function


def _refuse_set(self, name, value):
    raise FrozenError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _refuse_delete(self, name):
    raise FrozenError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def _getstate(self) -> list:
    return [getattr(self, f.name) for f in self.__record_fields__]


def _setstate(self, state: list) -> None:
    for f, value in zip(self.__record_fields__, state):
        object.__setattr__(self, f.name, value)


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


class TupleRecord(tuple):
    """A tuple whose items are named by the class's `_fields`, as collections.namedtuple's:
    equal, hashed, unpacked and pickled as that tuple. A subclass writes its own `__new__`
    (its defaults); one made a million times may be made by `tuple.__new__(cls, items)`.
    `fields`, `replace` and `as_dict` take it as they take a record."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        made = []
        for index, name in enumerate(cls._fields):
            setattr(cls, name, _tuplegetter(index, f"Item {index}: {name}"))
            made.append(Field())
            made[-1].name = name
        cls.__record_fields__ = tuple(made)

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
        return f"{self.__class__.__qualname__}({shown})"
