"""Version 4 UUIDs written as str(uuid.uuid4()) writes them, without the uuid module: it
imports platform, some 3% of every daemon start-up and 3 ms of every demo's
(docs/PERFORMANCE.md). The daemon's instance id takes its bits from os.urandom, scrub's
and the demo's fresh session ids from a seeded random.Random.
"""

from __future__ import annotations


def random_uuid(random: bytes) -> str:
    """The version 4 UUID of 16 random bytes (uuid.UUID(bytes=random, version=4))."""
    value = int.from_bytes(random, "big")
    value = value & ~(0xC000 << 48) | 0x8000 << 48  # RFC 4122's variant
    value = value & ~(0xF000 << 64) | 4 << 76  # version 4: random
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
