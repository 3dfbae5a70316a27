"""rpquery's alembic migrations (installed as ``rpquery.schema``)."""
