"""The store: every table, the dialect differences, migrations glue and the catalog."""
