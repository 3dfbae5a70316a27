"""rpquery benchmarks: named scenarios on generated clouds, timed with pytest-benchmark on
every available backend, with statement counts, EXPLAIN checks, a report and plots.

Entry point: ``python -m benchmarks.run`` (``make bench``); see ``docs/benchmarks.md``.
"""
