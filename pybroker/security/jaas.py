"""Kafka's JAAS configuration values (``sasl.jaas.config``), parsed as Kafka's ``JaasConfig`` does.

A value is one or more entries ``<LoginModuleClass> <controlFlag> (<key>=<value>)* ;`` read with
the rules of Java's ``StreamTokenizer`` as Kafka sets it up:

- a word is a letter, ``_``, ``$`` or ``-`` (or a character above U+009F) followed by any of those,
  digits and ``.``; so ``org.apache.kafka.common.security.plain.PlainLoginModule`` and
  ``user_alice`` are words;
- a value is a word or a quoted string (``"…"`` or ``'…'``, with Java's backslash escapes); an
  unquoted number or symbol is no value (``Value not specified for key …``), so passwords that
  are not plain words must be quoted;
- ``//`` and ``/* */`` comments, and a lone ``/``, which starts a comment to the end of the line;
- the control flag is ``required``, ``requisite``, ``sufficient`` or ``optional`` in any case;
- every entry ends with ``;``.

Errors are ``JaasConfigError`` with Kafka's texts. Two are pybroker's own, where Java would go
on silently: a quoted value that is not closed before the end of the line or of the text (Java
ends the string there), and an option name that is not a word or quoted string (Java stores it
under a null name).

A ``sasl.jaas.config`` broker property must hold exactly one entry (``parse_jaas_entry``,
Kafka's ``JaasContext.load``).
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class JaasConfigError(ValueError):
    """A JAAS configuration value that Kafka would refuse (Kafka throws IllegalArgumentException)."""


class ControlFlag(enum.Enum):
    """A login module's control flag (``javax.security.auth.login.AppConfigurationEntry``)."""

    REQUIRED = "required"
    REQUISITE = "requisite"
    SUFFICIENT = "sufficient"
    OPTIONAL = "optional"


class JaasEntry(NamedTuple):
    """One login module entry: its class name, its control flag and its options."""

    login_module: str
    control_flag: ControlFlag
    options: dict[str, str]


# Token kinds of the tokenizer.
_EOF, _WORD, _QUOTED, _NUMBER, _CHAR = "eof", "word", "quoted", "number", "char"


class _Token(NamedTuple):
    kind: str
    text: str | None  # the string value of a word or quoted string (Java's ``sval``), else None
    char: str | None = None  # the character of a _CHAR token

    def describe(self) -> str:
        if self.kind == _EOF:
            return "the end of the text"
        if self.kind == _NUMBER:
            return "a number"
        if self.kind == _CHAR:
            return f"'{self.char}'"
        return f"'{self.text}'"


_ESCAPES = {"a": "\x07", "b": "\b", "f": "\x0c", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


def _is_word_char(c: str) -> bool:
    # StreamTokenizer's defaults (a-z, A-Z, U+00A0-U+00FF, and everything above U+00FF) plus
    # Kafka's wordChars('-'), ('_'), ('$').
    o = ord(c)
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or o >= 0xA0 or c in "-_$"


def _is_number_char(c: str) -> bool:
    # parseNumbers(): digits, '.' and '-'.
    return ("0" <= c <= "9") or c in ".-"


class _Tokenizer:
    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def _peek(self) -> str | None:
        return self._text[self._pos] if self._pos < len(self._text) else None

    def _read(self) -> str | None:
        c = self._peek()
        if c is not None:
            self._pos += 1
        return c

    def _skip_line(self) -> None:
        end = len(self._text)
        for stop in ("\n", "\r"):
            i = self._text.find(stop, self._pos)
            if 0 <= i < end:
                end = i
        self._pos = end

    def next(self) -> _Token:
        while True:
            c = self._read()
            while c is not None and ord(c) <= 0x20:
                c = self._read()
            if c is None:
                return _Token(_EOF, None)
            if _is_number_char(c):
                if c == "-":
                    n = self._peek()
                    if n is None or not _is_number_char(n) or n == "-":
                        return _Token(_CHAR, None, "-")
                seen_dot = c == "."
                while (n := self._peek()) is not None and (
                        "0" <= n <= "9" or (n == "." and not seen_dot)):
                    seen_dot = seen_dot or n == "."
                    self._pos += 1
                return _Token(_NUMBER, None)
            if _is_word_char(c):
                start = self._pos - 1
                while (n := self._peek()) is not None and (_is_word_char(n) or _is_number_char(n)):
                    self._pos += 1
                return _Token(_WORD, self._text[start:self._pos])
            if c in "\"'":
                return _Token(_QUOTED, self._quoted(c))
            if c == "/":
                n = self._peek()
                if n == "*":
                    end = self._text.find("*/", self._pos + 1)
                    if end < 0:  # Java: an unclosed /* comment ends the text
                        self._pos = len(self._text)
                        return _Token(_EOF, None)
                    self._pos = end + 2
                else:  # "//", and a lone '/' (StreamTokenizer's comment character)
                    self._skip_line()
                continue
            return _Token(_CHAR, None, c)

    def _quoted(self, quote: str) -> str:
        out: list[str] = []
        while True:
            c = self._read()
            if c is None or c in "\r\n":
                raise JaasConfigError("Quoted value not terminated by a closing quote in JAAS config")
            if c == quote:
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            c = self._read()
            if c is None:
                raise JaasConfigError("Quoted value not terminated by a closing quote in JAAS config")
            if "0" <= c <= "7":  # octal escape: up to 3 digits, the 3rd only when the 1st is 0-3
                value = int(c)
                n = self._peek()
                if n is not None and "0" <= n <= "7":
                    self._pos += 1
                    value = value * 8 + int(n)
                    n = self._peek()
                    if n is not None and "0" <= n <= "7" and c <= "3":
                        self._pos += 1
                        value = value * 8 + int(n)
                out.append(chr(value))
            else:
                out.append(_ESCAPES.get(c, c))


def _control_flag(token: _Token) -> ControlFlag:
    if token.text is None:
        raise JaasConfigError("Login module control flag is not available in the JAAS config")
    try:
        return ControlFlag(token.text.lower())
    except ValueError:
        raise JaasConfigError(
            f"Invalid login module control flag '{token.text}' in JAAS config") from None


def _entry(tokenizer: _Tokenizer, first: _Token) -> JaasEntry:
    if first.text is None:
        raise JaasConfigError(
            f"Login module class name expected in JAAS config, found {first.describe()}")
    token = tokenizer.next()
    if token.kind == _EOF:
        raise JaasConfigError("Login module control flag not specified in JAAS config")
    flag = _control_flag(token)
    options: dict[str, str] = {}
    token = tokenizer.next()
    while token.kind != _EOF and token.char != ";":
        key = token.text
        if key is None:
            raise JaasConfigError(
                f"Option name expected in JAAS config, found {token.describe()}")
        if tokenizer.next().char != "=" or (value := tokenizer.next().text) is None:
            raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
        options[key] = value
        token = tokenizer.next()
    if token.char != ";":
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    return JaasEntry(first.text, flag, options)


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every entry of a JAAS configuration value, in order (Kafka's ``JaasConfig``)."""
    tokenizer = _Tokenizer(text)
    entries: list[JaasEntry] = []
    while (token := tokenizer.next()).kind != _EOF:
        entries.append(_entry(tokenizer, token))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def parse_jaas_entry(text: str) -> JaasEntry:
    """The single entry of a ``sasl.jaas.config`` property value (Kafka's ``JaasContext.load``)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]
