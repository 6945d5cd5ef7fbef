"""The field readers every nvidia-smi parser shares: each spelling nvidia-smi prints for a
flag or a number, and what it does not know."""

from __future__ import annotations

import pytest

from gpuprov.parsers.text import integer, number, strip_ansi, yes_no


@pytest.mark.parametrize("value, expected", [
    ("Yes", True), (" Enabled ", True), ("Active", True), ("true", True), ("On", True),
    ("No", False), ("Disabled", False), ("Not Active", False), ("False", False), ("Off", False),
    ("N/A", None), ("Pending", None), ("", None), (None, None),
])
def test_flags_in_every_spelling(value, expected):
    assert yes_no(value) is expected


@pytest.mark.parametrize("value, expected", [
    ("81559 MiB", 81559.0), ("16x", 16.0), ("-3.5 W", -3.5), ("+2", 2.0), ("1.50 GHz", 1.5),
    ("N/A", None), ("[N/A]", None), ("Not Supported", None), ("[Not Supported]", None),
    ("Unknown Error", None), ("", None), (None, None), ("abc", None),
])
def test_numbers_and_what_is_not_one(value, expected):
    assert number(value) == expected


def test_integers_truncate_and_colour_codes_go():
    assert (integer("63 C"), integer("2.9"), integer("N/A")) == (63, 2, None)
    assert strip_ansi("\x1b[1;32mGPU 0: OK\x1b[0m") == "GPU 0: OK"
