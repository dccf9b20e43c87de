"""CSV exporter of a table (RFC 4180, a header row, empty cells for missing values).

The cells are written as they are, not through their columns' formats: numbers stay plain decimals
(machine-readable), booleans read 'true'/'false'. The tables themselves are in reports/raw_tables.py.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from orchestrator.reports.tables import Table


def _raw(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.headers)
    writer.writerows([_raw(cell) for cell in row] for row in table.cells)
    return buf.getvalue()
