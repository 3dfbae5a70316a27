"""The read path: request parsing, SQL clauses, provider lists, allocation candidates."""
