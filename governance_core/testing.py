"""Test helpers for embedders and adapter authors: the storage contract, fixed clock and ids.

:class:`StoreContract` is the storage port's contract as tests. Subclass it, return a fresh,
empty store from :meth:`StoreContract.make_store`, and let pytest collect the subclass (its name
must start with ``Test``)::

    class TestMyStore(StoreContract):
        def make_store(self) -> Store:
            return MyStore(dsn="...")

The suite needs no pytest import: it is a plain class with ``setup_method``/``teardown_method``
and raises ``AssertionError`` with a message, so it also runs under ``python -O``.

:func:`make_governance` gives a bootstrapped :class:`~governance_core.service.Governance` with a
fixed clock and seeded ids, so tests of code built on the library are deterministic.
"""

from __future__ import annotations

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests, ValueCipher
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap, Governance
from governance_core.storage.contract import StoreContract
from governance_core.storage.memory import MemoryStore
from governance_core.storage.protocol import Store

__all__ = ["FixedClock", "SeededIds", "StoreContract", "make_governance"]


def make_governance(
    store: Store | None = None,
    *,
    seed: int = 0,
    clock: FixedClock | None = None,
    cipher: ValueCipher | None = None,
) -> tuple[Governance, Bootstrap]:
    """Return a deterministic facade (a ``MemoryStore`` unless given one) and its bootstrap.

    The facade's clock is ``clock`` (a new :class:`FixedClock` by default) and its ids come
    from ``SeededIds(seed)``, so the same arguments give the same ids and times (token secrets
    stay random). Sensitive values are kept with ``cipher``: by default
    :class:`~governance_core.encryption.PlaintextForTests`, since a test store holds no real
    data (pass a ``FernetCipher`` to exercise encryption). The bootstrap holds the account,
    its admin user, defaults and an account token.
    """
    governance = Governance(
        store if store is not None else MemoryStore(),
        clock=clock or FixedClock(),
        ids=SeededIds(seed),
        config=Config(cipher=cipher if cipher is not None else PlaintextForTests()),
    )
    return governance, governance.bootstrap()
