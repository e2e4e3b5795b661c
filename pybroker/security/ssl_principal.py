"""The principal of a TLS client certificate: its distinguished name and ``ssl.principal.mapping.rules``.

Owns two pieces of Kafka's ``DefaultKafkaPrincipalBuilder`` for SSL connections:

- `distinguished_name`: the subject of a certificate as Java's ``X500Principal.getName()`` writes it
  (RFC 2253): RDNs last-first, joined by ``,`` without spaces, multi-valued RDNs joined by ``+``;
  only CN, C, L, ST, O, OU, STREET, DC and UID by name, any other attribute as ``<OID>=#<hex of
  its DER value>``; ``,=+<>#;"\\`` escaped with ``\\`` wherever they appear, leading and trailing
  spaces escaped too (Java's ``AVA.toRFC2253String``).
- `SslPrincipalMapper`: ``ssl.principal.mapping.rules`` (``RULE:<regex>/<replacement>/[L|U]`` and
  ``DEFAULT``, comma-separated): the first rule whose regex matches the **whole** DN gives the
  name (Java's ``replaceAll``, then lower or upper case); no rule matching raises `NoMatchingRule`.
"""

from __future__ import annotations

import re

from cryptography import x509
from cryptography.x509.oid import NameOID

from pybroker.common.config import ConfigError
from pybroker.security.principal import ANONYMOUS, KafkaPrincipal

_KEYWORDS = {
    NameOID.COMMON_NAME: "CN",
    NameOID.COUNTRY_NAME: "C",
    NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST",
    NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC",
    NameOID.USER_ID: "UID",
}
_ESCAPED = ',=+<>#;"\\'


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _attribute_der(attribute: x509.NameAttribute) -> bytes:
    """The DER encoding of an attribute's value (tag, length, content), as Java prints it in hex."""
    tag = attribute._type.value  # the ASN.1 string type the certificate used
    value = attribute.value
    if isinstance(value, bytes):  # X500UniqueIdentifier and other BIT STRING values
        content = b"\x00" + value
    elif tag == 30:  # BMPString
        content = value.encode("utf-16-be")
    elif tag == 28:  # UniversalString
        content = value.encode("utf-32-be")
    elif tag == 12:
        content = value.encode("utf-8")
    else:
        content = value.encode("latin-1")
    return bytes([tag]) + _der_length(len(content)) + content


def _value(text: str) -> str:
    out = []
    for c in text:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    chars = out
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in (" ", "\r"):
        trail -= 1
    return "".join("\\" + c if i < lead or i > trail else c for i, c in enumerate(chars))


def _ava(attribute: x509.NameAttribute) -> str:
    keyword = _KEYWORDS.get(attribute.oid)
    if keyword is None or isinstance(attribute.value, bytes):
        return f"{keyword or attribute.oid.dotted_string}=#{_attribute_der(attribute).hex()}"
    return f"{keyword}={_value(attribute.value)}"


def distinguished_name(name: x509.Name | x509.Certificate | bytes) -> str:
    """Java's ``X500Principal.getName()`` of a name, of a certificate's subject, or of the
    subject of a DER certificate."""
    if isinstance(name, bytes):
        name = x509.load_der_x509_certificate(name)
    if isinstance(name, x509.Certificate):
        name = name.subject
    return ",".join("+".join(_ava(a) for a in rdn) for rdn in reversed(name.rdns))


class NoMatchingRule(Exception):
    """No ``ssl.principal.mapping.rules`` rule applies to a DN: the connection fails."""


# Kafka's SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", case: str = "") -> None:
        self.source = pattern
        self.pattern = None if pattern is None else re.compile(pattern)
        self.replacement = replacement
        self.case = case

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _expand(self.replacement, m), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __repr__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.source}/{self.replacement}/{self.case}"


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's ``Matcher.appendReplacement``: ``$n`` is group n (as many digits as name a group),
    ``\\x`` is a literal x; a group that did not take part gives the empty string."""
    out: list[str] = []
    i, groups = 0, match.re.groups
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            number = int(replacement[i + 1])
            i += 2
            while i < len(replacement) and replacement[i].isdigit() and number * 10 + int(replacement[i]) <= groups:
                number = number * 10 + int(replacement[i])
                i += 1
            if number > groups:
                raise ValueError(f"No group {number}")
            out.append(match.group(number) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed once; `name` maps a DN to the principal name."""

    def __init__(self, rules: str | None = "DEFAULT") -> None:
        text = (rules if rules is not None else "DEFAULT").strip()
        self.rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text):
            rule = m.group(1)
            if m.start() == len(text) and not rule:
                break
            parsed = _RULE_PARSER.match(rule)
            if parsed is None:
                raise ConfigError(f"Invalid rule: {rule}")
            if parsed.end() != len(rule):
                raise ConfigError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[parsed.end():]}`")
            if parsed.group(1) is not None:
                self.rules.append(_Rule())
            elif parsed.group(2) is not None:
                self.rules.append(_Rule(parsed.group(2), parsed.group(4), parsed.group(6)))

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            principal = rule.apply(distinguished_name)
            if principal is not None:
                return principal
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self.rules}")


class SslPrincipalBuilder:
    """The principal of a connection on an SSL listener (Kafka's ``DefaultKafkaPrincipalBuilder``):
    ``User:<mapped DN>`` of the client certificate, ``User:ANONYMOUS`` without one."""

    def __init__(self, rules: str | None = "DEFAULT") -> None:
        self.mapper = SslPrincipalMapper(rules)

    def __call__(self, peer_certificate: bytes | None) -> KafkaPrincipal:
        """From the DER client certificate; raises `NoMatchingRule` when no rule applies."""
        if peer_certificate is None:
            return ANONYMOUS
        return KafkaPrincipal.user(self.mapper.name(distinguished_name(peer_certificate)))
