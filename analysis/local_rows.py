"""Small frames made on the driver (run names, group ids, chosen partitions) as relations of the JVM: ``VALUES``
rows, or for many rows one JSON literal that Spark's optimizer parses.

``SparkSession.createDataFrame`` of a Python list makes its rows an RDD of pickled Python rows: every scan of
it starts Python workers to unpickle them, in each plan that reads it.  A 30-s run's analysis ran eleven such
stages (about 0.3 s each, bench/RESULTS.md).  Here the rows become a ``LocalRelation``: Spark's optimizer
folds the projections and filters above it, a broadcast of it needs no job, and no Python worker starts.
Beyond ``VALUES_ROWS`` rows Spark's parser and analyser take longer over ``VALUES`` than the JSON literal's
one job costs (10,000 run names: about 1 s against 0.3 s).
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, StructType

_SCHEMAS: dict[str, StructType] = {}
VALUES_ROWS = 256


def schema_of(spark: SparkSession, schema: StructType | str) -> StructType:
    """``schema``, or the ``StructType`` of a DDL string (``"run string, n int"``; parsed by Spark once per
    string)."""
    if isinstance(schema, StructType):
        return schema
    if schema not in _SCHEMAS:
        jvm = spark.sparkContext._jvm
        _SCHEMAS[schema] = StructType.fromJson(json.loads(jvm.org.apache.spark.sql.types.StructType
                                                          .fromDDL(schema).json()))
    return _SCHEMAS[schema]


def _name(n: str) -> str:
    return "`" + n.replace("`", "``") + "`"


def _literal(v: Any) -> str:
    """A SQL literal for a plain Python value.  Strings as UTF-8 bytes in hex, cast: no quoting or escape of
    Spark's parser (nor its ``${...}`` substitution) applies to them."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return f"{v}L" if -(1 << 63) <= v < (1 << 63) else f"CAST('{v}' AS DECIMAL(38,0))"
    if isinstance(v, float):
        text = repr(v) if math.isfinite(v) else ("NaN" if v != v else ("Infinity" if v > 0 else "-Infinity"))
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(v, str):
        return f"CAST(X'{v.encode('utf-8').hex()}' AS STRING)"
    raise TypeError(f"local_rows: a {type(v).__name__} value ({v!r:.60}) is not a plain SQL literal")


def local_rows(spark: SparkSession, rows: Iterable[Sequence[Any]], schema: StructType | str) -> DataFrame:
    """``rows`` (tuples of None, bool, int, float or str, one value per field) as a DataFrame of ``schema``
    (a ``StructType`` or a DDL string), held in the JVM's plan.  No rows: an empty relation with the columns.
    A column without a null among the rows is not nullable (Spark's inference for ``VALUES``)."""
    from pyspark.sql import functions as F

    struct = schema_of(spark, schema)
    fields = struct.fields
    rows = list(rows)
    values = []
    for row in rows:
        if len(row) != len(fields):
            raise ValueError(f"local_rows: a row of {len(row)} values for {len(fields)} columns: {row!r:.100}")
        values.append("(" + ", ".join(_literal(v) for v in row) + ")")
    if not values:   # the optimizer makes this an empty LocalRelation
        nulls = ", ".join(f"CAST(NULL AS {f.dataType.simpleString()}) AS {_name(f.name)}" for f in fields)
        return spark.sql(f"SELECT {nulls} WHERE FALSE")
    if len(values) > VALUES_ROWS:
        names = [f.name for f in fields]
        text = json.dumps([dict(zip(names, row)) for row in rows])
        return spark.range(0, 1, 1, 1).select(F.inline(F.from_json(F.lit(text), ArrayType(struct))))
    cast = ", ".join(f"CAST(col{i + 1} AS {f.dataType.simpleString()}) AS {_name(f.name)}"
                     for i, f in enumerate(fields))
    return spark.sql(f"SELECT {cast} FROM VALUES {', '.join(values)}")
