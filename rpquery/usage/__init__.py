"""Usage reads and the trigger-kept usage tables (verify and rebuild)."""
