"""Helpers of the nova-queue test suite that are not fixtures (fixtures live in the
conftest.py files). ``pythonpath = ["tests/lib"]`` in pyproject.toml puts this package on
``sys.path`` for pytest; import it as ``from novatests.seed import expire_lease``.
"""
