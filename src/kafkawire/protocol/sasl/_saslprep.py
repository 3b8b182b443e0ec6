"""SASLprep (RFC 4013, a profile of stringprep, RFC 3454), which SCRAM applies to user
names and passwords, and SCRAM's escaping of a user name."""

from __future__ import annotations

import stringprep
import unicodedata

from kafkawire.protocol.sasl._errors import SaslPrepError


# RFC 4013 section 2.3: the stringprep tables whose characters must not appear in output.
_PROHIBITED = (
    ("a non-ASCII space", stringprep.in_table_c12),
    ("an ASCII control character", stringprep.in_table_c21),
    ("a non-ASCII control character", stringprep.in_table_c22),
    ("a private-use character", stringprep.in_table_c3),
    ("a non-character code point", stringprep.in_table_c4),
    ("a surrogate code point", stringprep.in_table_c5),
    ("a character inappropriate for plain text", stringprep.in_table_c6),
    ("a character inappropriate for canonical representation", stringprep.in_table_c7),
    ("a display-property-changing or deprecated character", stringprep.in_table_c8),
    ("a tagging character", stringprep.in_table_c9),
)


def saslprep(value: str, *, allow_unassigned: bool = True, what: str = "string") -> str:
    """Prepare ``value`` with SASLprep (RFC 4013) and return the result.

    Mapping (non-ASCII spaces to SPACE, "commonly mapped to nothing" characters removed),
    NFKC normalization, the prohibited-output check and the bidirectional-text check.
    ``allow_unassigned`` True is RFC 3454's "query" semantics, what a client uses (RFC 5802
    section 5.1); False refuses unassigned code points ("stored strings").  Raises
    :class:`SaslPrepError` naming ``what`` and the offending character.
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch
        for ch in value
        if not stringprep.in_table_b1(ch)
    )
    out = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    for ch in out:
        for label, table in _PROHIBITED:
            if table(ch):
                raise SaslPrepError(
                    f"{what} contains {label} (U+{ord(ch):04X}), which SASLprep (RFC 4013) "
                    f"prohibits; remove it"
                )
        if not allow_unassigned and stringprep.in_table_a1(ch):
            raise SaslPrepError(
                f"{what} contains the unassigned code point U+{ord(ch):04X}, which SASLprep "
                f"refuses in stored strings"
            )
    # RFC 3454 section 6: right-to-left text must be all RandALCat-or-neutral, and begin
    # and end with a RandALCat character.
    if any(stringprep.in_table_d1(ch) for ch in out):
        if any(stringprep.in_table_d2(ch) for ch in out):
            raise SaslPrepError(
                f"{what} mixes right-to-left and left-to-right characters, which SASLprep's "
                f"bidirectional check (RFC 3454 section 6) prohibits"
            )
        if not (stringprep.in_table_d1(out[0]) and stringprep.in_table_d1(out[-1])):
            raise SaslPrepError(
                f"{what} contains right-to-left characters but does not begin and end with "
                f"one, which SASLprep's bidirectional check (RFC 3454 section 6) prohibits"
            )
    return out


def scram_escape_username(name: str) -> str:
    """A (SASLprepped) user name as a SCRAM ``saslname``: "=" as "=3D", "," as "=2C"."""
    return name.replace("=", "=3D").replace(",", "=2C")
