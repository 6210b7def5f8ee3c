"""analysis.local_rows: rows made on the driver become a relation of the JVM (no Python worker reads them), with
every value and the schema asked for, whichever of its two forms holds them."""
from __future__ import annotations

import math

import pytest

import analysis.local_rows as local_rows_module
from analysis.checks_base import ANOMALY_SCHEMA
from analysis.local_rows import local_rows

DDL = "run string, `group` int, n bigint, d double, s string, b boolean"
ROWS = [("r'1\"\\ ${x}\n ü`", 3, 2 ** 40, 1.5, None, True),
        (None, None, -(2 ** 63), float("nan"), "z", False),
        ("", 0, 0, float("-inf"), "--", None)]


def _values(df):
    return [tuple(r) for r in df.collect()]


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            if isinstance(b, float) and math.isnan(b):
                assert math.isnan(a)
            else:
                assert a == b and type(a) is type(b)


def _python_rdds(df) -> int:
    return df._jdf.queryExecution().executedPlan().execute().toDebugString().count("PythonRDD")


def test_values_round_trip_and_read_without_python(spark):
    df = local_rows(spark, ROWS, DDL)
    assert df.schema.simpleString() == "struct<run:string,group:int,n:bigint,d:double,s:string,b:boolean>"
    _same(_values(df), ROWS)
    assert "LocalTableScan" in df._jdf.queryExecution().executedPlan().toString()
    assert _python_rdds(df) == 0


def test_many_rows_take_the_json_form_with_the_same_values(spark, monkeypatch):
    monkeypatch.setattr(local_rows_module, "VALUES_ROWS", 1)
    df = local_rows(spark, ROWS, DDL)
    assert "LocalTableScan" not in df._jdf.queryExecution().executedPlan().toString()
    assert df.schema.simpleString() == "struct<run:string,group:int,n:bigint,d:double,s:string,b:boolean>"
    _same(_values(df), ROWS)
    assert _python_rdds(df) == 0


def test_no_rows_is_an_empty_relation_with_the_columns(spark):
    df = local_rows(spark, [], ANOMALY_SCHEMA)
    assert df.collect() == []
    assert df.schema.simpleString() == ("struct<run:string,kind:string,message:string,group:string,topic:string,"
                                        "partition:int,op_indexes:array<bigint>,event_types:array<string>,"
                                        "details:string>")
    assert "LocalTableScan" in df._jdf.queryExecution().executedPlan().toString()


def test_a_value_that_is_not_plain_or_a_row_of_the_wrong_width_is_refused(spark):
    with pytest.raises(TypeError, match="list value"):
        local_rows(spark, [("r", [1])], "run string, xs array<int>")
    with pytest.raises(ValueError, match="a row of 1 values for 2 columns"):
        local_rows(spark, [("r",)], "run string, n int")
