"""The analysis pipeline: chaos runs -> Parquet tables, Spark checkers, an HTML report (docs/analysis.md)."""
