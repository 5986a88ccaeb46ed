"""A number in text nobody here wrote (a query string, a box's file, a login node's squeue): ASCII digits only,
bounded. `str.isdigit()` is true of "²" (which `int()` refuses: a 500, a crashed tick) and of "٤٢" (which `int()`
reads as 42), and `int()` alone takes " 4_2\\n" too. The one rule is here, on both sides of the wire: the control
host imports it from the wrapper, and tests/site/test_digits.py walks the tree for any other reading."""

import re

DIGITS = re.compile(r"[0-9]{1,18}")  # 18 digits: every count, id and stamp we read; more is not one of ours
SIGNED = re.compile(r"-?[0-9]{1,18}")  # an exit code: a signal's is negative (Popen's -9)


def ascii_int(text, most=None, signed=False):
    """The number `text` spells in 1–18 ASCII digits (a leading "-" where signed; at most `most` when given),
    else None."""
    if not isinstance(text, str) or not (SIGNED if signed else DIGITS).fullmatch(text):
        return None
    value = int(text)
    return value if most is None or value <= most else None
