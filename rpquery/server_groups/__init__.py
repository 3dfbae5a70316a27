"""Server groups: affinity rules, weighers, scheduling."""
