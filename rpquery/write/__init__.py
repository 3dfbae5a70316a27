"""The write path: providers, inventories, associations, consumers, allocations, reshapes."""
