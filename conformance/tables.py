"""Every case of the tables (``table_data``, ``table_groups``, ``table_admin``, ``table_txn``, ``table_admin2``),
each id once.

Kept out of conformance/cases.py, whose types and rules the tables import, so that no import circle forms."""
from __future__ import annotations

from conformance import table_admin, table_admin2, table_data, table_groups, table_txn
from conformance.cases import Case


def all_cases() -> list[Case]:
    cases = (table_data.cases() + table_groups.cases() + table_admin.cases() + table_txn.cases()
             + table_admin2.cases())
    seen: set[str] = set()
    for c in cases:
        if c.id in seen:
            raise ValueError(f"two cases are named {c.id}")
        seen.add(c.id)
    return cases
