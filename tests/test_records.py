"""tailer/records.py: a record is made, compares, shows, hashes, copies and pickles as the
dataclass it stands for."""

import dataclasses
import pickle

import pytest
from hypothesis import given, strategies as st

from tailer import records
from tailer.records import record


def both(frozen: bool, slots: bool):
    """The same classes as records and as dataclasses: a base with a field left out of
    comparing, one left out of the repr and a keyword-only one; a subclass adding a field
    with a default made for each instance, and a keyword-only one of its own."""
    def classes(make, field, factory):
        base = make(type("Thing", (), {
            "__annotations__": {"name": "str", "count": "int", "cache": "list | None", "hidden": "int",
                                "extra": "tuple"},
            "cache": field(default=None, compare=False), "hidden": field(default=0, repr=False),
            "extra": field(default=(), kw_only=True)}), frozen=frozen, slots=slots)
        sub = make(type("Sub", (base,), {
            "__annotations__": {"items": "list", "tag": "str"},
            "items": field(**{factory: list}), "tag": field(default="t", kw_only=True)}),
            frozen=frozen, slots=slots)
        return base, sub
    return (classes(records.record, records.field, "factory"),
            classes(dataclasses.dataclass, dataclasses.field, "default_factory"))


values = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.sampled_from([None, [1]]),
                   st.integers(0, 1), st.sampled_from([(), ("x",)]))
sub_values = st.tuples(st.sampled_from([[], [2]]), st.sampled_from(["t", "u"]))


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("slots", [False, True])
@given(one=values, other=values, more=sub_values)
def test_a_record_is_its_dataclass(frozen, slots, one, other, more):
    (made, made_sub), (plain, plain_sub) = both(frozen, slots)

    def of(cls, value):
        *positional, extra = value
        return cls(*positional, extra=extra)

    def sub_of(cls, value):
        *positional, extra = value
        return cls(*positional, more[0], extra=extra, tag=more[1])

    assert (of(made, one) == of(made, other)) == (of(plain, one) == of(plain, other))
    assert repr(of(made, one)) == repr(of(plain, one))
    assert repr(sub_of(made_sub, one)) == repr(sub_of(plain_sub, one))
    assert made_sub.__match_args__ == plain_sub.__match_args__
    assert [f.name for f in records.fields(made_sub)] == [f.name for f in dataclasses.fields(plain_sub)]
    assert of(made, one) != one  # another class is never equal
    assert of(made, one) != sub_of(made_sub, one)
    assert records.as_dict(sub_of(made_sub, one)) == dataclasses.asdict(sub_of(plain_sub, one))
    changed = records.replace(sub_of(made_sub, one), count=7, tag="v")
    assert changed == records.replace(sub_of(made_sub, one), count=7, tag="v")
    assert repr(changed) == repr(dataclasses.replace(sub_of(plain_sub, one), count=7, tag="v"))
    assert made_sub("a", 1).items is not made_sub("a", 1).items  # a new list for each
    assert hasattr(made_sub("a", 1), "__dict__") == hasattr(plain_sub("a", 1), "__dict__")
    if frozen:
        assert hash(of(made, one)) == hash(of(plain, one))
        with pytest.raises(records.FrozenError):
            of(made, one).count = 9
        with pytest.raises(records.FrozenError):
            del of(made, one).count
    else:
        with pytest.raises(TypeError):
            hash(of(made, one))


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("slots", [False, True])
def test_a_record_goes_to_a_worker_and_back(frozen, slots):
    """The report's workers send records through pickle: a frozen, slotted one too."""
    global Thing, Sub  # pickle finds a class by its name in its module
    (Thing, Sub), _ = both(frozen, slots)
    value = Sub("a", 1, [1], 1, [3], extra=("x",), tag="u")
    back = pickle.loads(pickle.dumps(value))
    assert back == value and back.hidden == 1 and back.cache == [1]


def test_as_dict_makes_dicts_of_the_records_inside():
    (made, _), _ = both(False, True)
    outer = made("o", 1, cache=[made("i", 2)], extra=(made("j", 3),))
    data = records.as_dict(outer)
    assert data["cache"] == [records.as_dict(made("i", 2))]
    assert data["extra"] == (records.as_dict(made("j", 3)),)


def test_a_shared_mutable_default_or_a_non_record_is_refused():
    with pytest.raises(TypeError, match="factory"):
        record(type("Shared", (), {"__annotations__": {"items": "list"}, "items": []}))
    with pytest.raises(TypeError):
        records.field(default=0, factory=int)
    with pytest.raises(TypeError, match="not a record"):
        records.fields(object())


class Pair(records.TupleRecord):
    """A TupleRecord beside the namedtuple it stands for (`Pair` below, made by collections)."""

    __slots__ = ()
    _fields = ("first", "second")

    def __new__(cls, first, second=None):
        return tuple.__new__(cls, (first, second))


PlainPair = __import__("collections").namedtuple("Pair", ("first", "second"), defaults=(None,))


@given(first=st.integers(), second=st.one_of(st.none(), st.text(max_size=3)),
       other=st.integers(0, 2))
def test_a_tuple_record_is_its_namedtuple(first, second, other):
    made, plain = Pair(first, second), PlainPair(first, second)
    assert (made.first, made.second) == (plain.first, plain.second) == tuple(made)
    assert made == plain == (first, second) and hash(made) == hash(plain)
    assert (made == Pair(other)) == (plain == PlainPair(other))
    assert Pair(first) == PlainPair(first)  # the default
    assert repr(made) == repr(plain)
    assert [*made] == [*plain] and made[1] == plain[1] and len(made) == 2
    back = pickle.loads(pickle.dumps(made))  # the report's workers send positions
    assert type(back) is Pair and back == made
    assert tuple.__new__(Pair, (first, second)) == made  # as the line readers make them
    with pytest.raises(AttributeError):
        made.first = 1
    assert not hasattr(made, "__dict__")


@given(first=st.integers(), second=st.one_of(st.none(), st.text(max_size=3)))
def test_a_tuple_record_is_taken_by_fields_replace_and_as_dict(first, second):
    made = Pair(first, second)
    assert records.is_record(made) and [f.name for f in records.fields(Pair)] == ["first", "second"]
    assert records.replace(made, second="x") == Pair(first, "x")
    assert type(records.replace(made, first=0)) is Pair
    assert records.as_dict(made) == {"first": first, "second": second}
    assert records.as_dict(Wrapped(made)) == {"pair": {"first": first, "second": second}}


@record(slots=True)
class Wrapped:
    pair: Pair


counts = st.integers(0, 10**15)
usages = st.tuples(counts, counts, counts, counts, counts, counts)


@given(one=usages, other=usages)
def test_usage_adds_subtracts_and_shows_field_by_field(one, other):
    """event_records.Usage (a TupleRecord, added in C) against the record it replaced: made
    by position or by name, its sums and differences field by field, and its repr."""
    from tailer.copilot.event_records import Usage

    names = [f.name for f in records.fields(Usage)]
    assert names == ["request_count", "input_tokens", "output_tokens", "cache_read_tokens",
                     "cache_write_tokens", "nano_aiu"]
    first, second = Usage(*one), Usage(**dict(zip(names, other)))
    assert type(first + second) is Usage and type(first - second) is Usage
    assert list(first + second) == [a + b for a, b in zip(one, other)]
    assert list(first - second) == [a - b for a, b in zip(one, other)]
    assert sum([first, second], Usage()) == first + second
    assert Usage() == Usage(0, 0, 0, 0, 0, 0) and (first == Usage()) == (not any(one))
    assert records.as_dict(first) == dict(zip(names, one))
    assert repr(first) == "Usage(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, one)) + ")"
    assert first.aiu == one[5] / 1e9
    assert first.uncached_input() == max(one[1] - one[3] - one[4], 0)
