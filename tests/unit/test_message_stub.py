"""The committed ``protocol/messages.pyi`` is the stub the specs give (``python -m
pybroker.protocol.stubgen`` writes it), and it names what the generated classes hold."""

from __future__ import annotations

from pybroker.protocol import messages
from pybroker.protocol.stubgen import STUB, render


def test_the_committed_stub_is_current():
    assert STUB.read_text() == render(), "run: python -m pybroker.protocol.stubgen"


def test_the_stub_declares_every_class_and_slot():
    stub = STUB.read_text()
    for cls in (*messages.REQUEST_CLASSES.values(), *messages.RESPONSE_CLASSES.values()):
        assert f"\nclass {cls.__name__}:\n" in stub
        for name, nested in cls._structs.items():
            assert f"\n    class {name}:\n" in stub
            for slot in nested.__slots__:
                assert f"\n        {slot}: " in stub
