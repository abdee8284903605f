"""The receipts' canonical JSON is RFC 8785's: the RFC's published samples (Appendix B's
numbers, section 3.2.2's object with its exact bytes from 3.2.4, section 3.2.3's sort order)
give the RFC's output; what JCS cannot express is refused. And the verifier is one file that
needs nothing but the standard library and `cryptography`, the same file as
tools/verify_receipt.py."""

from __future__ import annotations

import ast
import json
import random
import struct
import sys
from http import HTTPStatus
from pathlib import Path

import pytest

from bot.receipt_verifier import CanonicalError, canonical, number

ROOT = Path(__file__).resolve().parents[2]

APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]
"""RFC 8785 Appendix B: IEEE 754 bit patterns and the JSON each is written as."""


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_numbers_are_written_as_rfc_8785_appendix_b_says(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonical(value) == expected.encode()
    assert canonical({"n": value}) == f'{{"n":{expected}}}'.encode()


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_nan_and_infinity_are_refused(bits: str) -> None:
    with pytest.raises(CanonicalError):
        canonical(struct.unpack(">d", bytes.fromhex(bits))[0])


SECTION_3_2_2 = r"""{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"""
SECTION_3_2_4_BYTES = """
7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 75 65 2c 66 61 6c 73 65 5d 2c 22 6e
75 6d 62 65 72 73 22 3a 5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31 65 2b 33 30
2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37 5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24
5c 75 30 30 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d
"""


def test_the_rfcs_sample_object_gives_the_rfcs_bytes() -> None:
    produced = canonical(json.loads(SECTION_3_2_2))
    assert produced == bytes.fromhex(SECTION_3_2_4_BYTES)
    assert produced.decode() == (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


def test_members_are_sorted_by_utf16_code_units_as_section_3_2_3_shows() -> None:
    sample = json.loads(
        r"""{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet",
        "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis"}"""
    )
    order = list(json.loads(canonical(sample)))
    assert order == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_what_jcs_cannot_express_is_refused() -> None:
    for value in ("\ud800", 2**53 + 1, {1: "x"}, b"bytes", float("nan")):
        with pytest.raises(CanonicalError):
            canonical(value)


def test_the_verifier_imports_only_the_standard_library_and_cryptography() -> None:
    tree = ast.parse((ROOT / "bot" / "receipt_verifier.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import needs the package"
            imported.add((node.module or "").split(".")[0])
    outside = {name for name in imported if name not in sys.stdlib_module_names}
    assert outside == {"cryptography"}


def test_tools_verify_receipt_is_the_shipped_verifier_itself() -> None:
    assert (ROOT / "tools" / "verify_receipt.py").samefile(ROOT / "bot" / "receipt_verifier.py")


@pytest.mark.parametrize("seed", range(5))
def test_integers_are_written_as_the_double_they_are(seed: int) -> None:
    """Integers take a shortcut (their digits) that must write what the double would."""
    rng = random.Random(seed)
    values = [0, 1, -1, 2**53, -(2**53), *(rng.randint(-(2**53), 2**53) for _ in range(200))]
    values += [rng.randint(-(10**6), 10**6) for _ in range(200)]
    for value in values:
        assert canonical(value) == number(float(value)).encode()
    assert canonical(HTTPStatus.OK) == b"200", "an int enum is its number"


@pytest.mark.parametrize("seed", range(20))
def test_random_documents_read_back_as_themselves(seed: int) -> None:
    """Escapes, non-ASCII and astral names, controls and nesting survive the canonical form."""
    rng = random.Random(seed)
    alphabet = ["a", "Z", "\x00", "\x1f", "\x7f", '"', "\\", "/", "é", "\u2028", "😀", "\ufb33"]

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))

    def value(depth: int) -> object:
        kind = rng.randrange(7 if depth < 3 else 4)
        if kind == 0:
            return text()
        if kind == 1:
            return rng.randint(-(2**53), 2**53)
        if kind == 2:
            return rng.choice([None, True, False, 0.5, -1e-7, 1e21])
        if kind == 3:
            return rng.random() * 10 ** rng.randint(-8, 22)
        if kind in (4, 5):
            return {text(): value(depth + 1) for _ in range(rng.randint(0, 4))}
        return [value(depth + 1) for _ in range(rng.randint(0, 4))]

    for _ in range(50):
        document = value(0)
        written = canonical(document)
        # An integral double is written as digits: read numbers back as doubles.
        assert json.loads(written, parse_int=float) == document
        assert canonical(json.loads(written, parse_int=float)) == written
