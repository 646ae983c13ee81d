"""tailer/records.py: a record compares, shows and hashes as the dataclass it stands for."""

import dataclasses
from dataclasses import field

import pytest
from hypothesis import given, strategies as st

from tailer.records import record


def both(frozen: bool, slots: bool):
    """The same class as a record and as a dataclass, with a field left out of comparing
    and one of the repr, and a keyword-only one."""
    def body():
        return {"__annotations__": {"name": "str", "count": "int", "cache": "list | None",
                                    "hidden": "int", "extra": "tuple"},
                "cache": field(default=None, compare=False), "hidden": field(default=0, repr=False),
                "extra": field(default=(), kw_only=True)}
    made = record(type("Thing", (), body()), frozen=frozen, slots=slots)
    plain = dataclasses.dataclass(type("Thing", (), body()), frozen=frozen, slots=slots)
    return made, plain


values = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.sampled_from([None, [1]]),
                   st.integers(0, 1), st.sampled_from([(), ("x",)]))


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("slots", [False, True])
@given(one=values, other=values)
def test_a_record_is_its_dataclass_but_for_the_compiling(frozen, slots, one, other):
    made, plain = both(frozen, slots)

    def of(cls, value):
        *positional, extra = value
        return cls(*positional, extra=extra)

    assert (of(made, one) == of(made, other)) == (of(plain, one) == of(plain, other))
    assert repr(of(made, one)) == repr(of(plain, one))
    assert of(made, one) != one  # another class is never equal
    if frozen:
        assert hash(of(made, one)) == hash(of(plain, one))
        with pytest.raises(dataclasses.FrozenInstanceError):
            of(made, one).count = 9
    else:
        with pytest.raises(TypeError):
            hash(of(made, one))
    assert dataclasses.astuple(of(made, one)) == dataclasses.astuple(of(plain, one))
