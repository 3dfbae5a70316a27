"""Differential test: rpquery and OpenStack Placement 16.0 asked the same questions.

Seeded random clouds are written through Placement's own REST API (:mod:`.cloud`),
random requests are asked of both (:mod:`.queries`), answers are compared in canonical
form (:mod:`.compare`) and every difference is either proven to be a documented
Placement bug (:mod:`.proofs`) or reported as unexplained. ``docs/differential.md``
explains how to run it and read a failure.
"""
