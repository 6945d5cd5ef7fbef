"""The ledger's schema: the migrations in gpuprov/data/ledger/, one SQL file each, applied
in the order of their numbers (a store records how many it has applied). A new migration is
a new file with the next number; an applied one is never edited."""

from __future__ import annotations

from gpuprov.resources import data_file

MIGRATIONS = [path.read_text() for path in sorted(
    data_file("ledger").iterdir(), key=lambda p: p.name) if path.name.endswith(".sql")]
