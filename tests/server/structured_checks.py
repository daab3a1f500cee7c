"""What a structured-output reply must be, checked independently of the server: JSON that a schema
accepts (Draft 2020-12, with the string formats the server supports) and spaced as the server
bounds JSON whitespace; an arithmetic expression of the grammar tests' ARITH_RULES; nested digit
lists. Used by test_structured_output.py."""
import datetime
import ipaddress
import json
import re
import uuid

from jsonschema import Draft202012Validator, FormatChecker

# The formats the server supports, checked here without jsonschema's optional dependencies (its
# own checkers for "time" and "date-time" need rfc3339-validator, and its "email" only looks
# for an "@").
FORMATS = FormatChecker(formats=())
_TIME = r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-]([0-9]{2}):([0-9]{2}))"


def _time_ok(m):
    h, mi, s, _, _, oh, om = m.groups()
    return int(h) <= 23 and int(mi) <= 59 and int(s) <= 60 and (oh is None or (int(oh) <= 23 and int(om) <= 59))


@FORMATS.checks("date", raises=ValueError)
def _is_date(v):
    return not isinstance(v, str) or (re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", v) is not None
                                      and datetime.date.fromisoformat(v) is not None)


@FORMATS.checks("time")
def _is_time(v):
    m = isinstance(v, str) and re.fullmatch(_TIME, v)
    return not isinstance(v, str) or bool(m and _time_ok(m))


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(v):
    if not isinstance(v, str):
        return True
    m = re.fullmatch(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]" + _TIME, v)
    return bool(m and _is_date(m.group(1)) and _time_ok(re.fullmatch(_TIME, v[11:])))


@FORMATS.checks("email")
def _is_email(v):
    """RFC 5321's Mailbox with a dot-string local part and a domain name: atoms separated by
    single dots, at most 64 characters before the '@', labels of letters, digits and inner
    hyphens, a top-level label of letters."""
    if not isinstance(v, str):
        return True
    local, at, domain = v.rpartition("@")
    atom = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
    label = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    return (bool(at) and len(local) <= 64 and re.fullmatch(rf"{atom}(\.{atom})*", local) is not None
            and re.fullmatch(rf"({label}\.)+[A-Za-z]{{2,63}}", domain) is not None)


@FORMATS.checks("uuid", raises=ValueError)
def _is_uuid(v):
    return not isinstance(v, str) or (re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", v) is not None
                                      and uuid.UUID(v) is not None)


@FORMATS.checks("ipv4", raises=ValueError)
def _is_ipv4(v):
    return not isinstance(v, str) or ipaddress.IPv4Address(v) is not None


# JSON whitespace as the server bounds it: none, one space, or a line break and at most 32 spaces
# or tabs, in each gap between two tokens.
WS_RUN = r" |\n[ \t]{0,32}"
STRING_OR_WS = re.compile(r'"(?:[^"\\]|\\.)*"|(\s+)', re.S)


def check_whitespace(text):
    assert text == text.strip(), f"whitespace around the value: {text!r}"
    for m in STRING_OR_WS.finditer(text):
        if m.group(1) is None:
            continue
        assert re.fullmatch(WS_RUN, m.group(1)), f"whitespace {m.group(1)!r} at {m.start()} of {text!r}"


def check_json(text, schema, what=""):
    """The value `text` holds; fails unless it is JSON that `schema` accepts, spaced as bounded."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise AssertionError(f"{what}: not JSON ({e}): {text!r}")
    errors = sorted(Draft202012Validator(schema, format_checker=FORMATS).iter_errors(value), key=str)
    assert not errors, f"{what}: {text!r} does not validate: {errors[0].message}"
    check_whitespace(text)
    return value


def arithmetic(text):
    """Whether `text` is an expression of ARITH_RULES: numbers of 1-3 digits, + - * /, unary minus and
    parentheses."""
    i = 0

    def number():
        nonlocal i
        start = i
        while i < len(text) and text[i] in "0123456789" and i - start < 3:
            i += 1
        return i > start

    def factor():
        nonlocal i
        if text.startswith("(", i):
            i += 1
            if not expr() or not text.startswith(")", i):
                return False
            i += 1
            return True
        if text.startswith("-", i):
            i += 1
            return factor()
        return number()

    def chain(item, ops):
        nonlocal i
        if not item():
            return False
        while i < len(text) and text[i] in ops:
            i += 1
            if not item():
                return False
        return True

    def term():
        return chain(factor, "*/")

    def expr():
        return chain(term, "+-")

    return expr() and i == len(text)


def nested_digits(value):
    """Whether `value` is a list whose items are digits 0-9 or such lists."""
    return isinstance(value, list) and all((isinstance(v, int) and 0 <= v <= 9) or nested_digits(v) for v in value)
