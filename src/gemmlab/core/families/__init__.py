"""The rungs' families: each module holds what its rungs need beyond the schema (thread counts,
shared memory, constraints, register estimates), beside one another by kernel family rather
than in one list; core/registry.py's table reads them."""
